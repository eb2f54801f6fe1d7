// A test suite's `revis serve` for the HTTP APIs' integration tests
// (anthropic_api_test.cpp, ollama_api_test.cpp, responses_api_test.cpp): the tiny test model as
// tier "small" with the Qwen2.5 template (tool calls), and as tier
// "thinker" with a template that leaves the model inside <think> unless
// enable_thinking is false; a 2048-token context and the token "s3cret".
// Started once per suite, stopped after it.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "node/node_process.h"
#include "support/testdata.h"

namespace revis::testing {

class ApiNode : public ::testing::Test {
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

  static inline TempDir* dir_ = nullptr;
  static inline NodeProcess* node_ = nullptr;
};

}  // namespace revis::testing
