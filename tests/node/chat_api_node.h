// A real node for the tests of the APIs rewritten as chat requests
// (Anthropic's messages, OpenAI's responses): the tiny test model in two
// tiers, "small" (the default, with Qwen2.5's template, which calls tools)
// and "thinker" (a template that leaves the model inside <think> unless
// enable_thinking is false), a context of 2048 tokens and the token
// "s3cret". One node per test suite: a suite derives its fixture from this.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "node/node_process.h"
#include "support/testdata.h"

namespace revis::testing {

class ChatApiNode : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    std::ofstream(dir_->file("think.jinja"))
        << "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
           "<|im_start|>assistant\n{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
           "{% else %}<think>{% endif %}";
    const std::string model = testdata("models/qwen2-Q8_0.gguf").string();
    std::ofstream(dir_->file("node.toml"))
        << "default_tier = \"small\"\n[tiers.small]\nmodel = \"" << model << "\"\nchat_template = \""
        << testdata("chat/templates/Qwen-Qwen2.5-7B-Instruct.jinja").string() << "\"\n"
        << "[tiers.thinker]\nmodel = \"" << model << "\"\nchat_template = \"" << dir_->file("think.jinja") << "\"\n";
    node_ = new NodeProcess({"--config", dir_->file("node.toml"), "-t", "2", "-c", "2048", "--token", "s3cret"});
    ASSERT_TRUE(node_->wait_ready()) << node_->log();
  }
  static void TearDownTestSuite() {
    delete node_;
    delete dir_;
    node_ = nullptr;
    dir_ = nullptr;
  }
  inline static TempDir* dir_ = nullptr;
  inline static NodeProcess* node_ = nullptr;
};

}  // namespace revis::testing
