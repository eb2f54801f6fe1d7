// The prompts of testdata/golden/*.json must tokenize to llama.cpp's
// prompt_tokens with the model's own BOS policy (special tokens not parsed).
// The models carry real vocabularies truncated to 1024 entries.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "tok_test_util.h"

namespace revis::test {
namespace {

TEST(GoldenPrompts, MatchLlamaCpp) {
  std::map<std::string, Loaded> models;  // by model file name
  size_t checked = 0, pass = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testdata() / "golden")) {
    const auto& path = entry.path();
    if (path.extension() != ".json" || path.filename() == "prompts.json") continue;
    const auto json = nlohmann::json::parse(read_file(path));
    const std::string model = json.at("model").get<std::string>();
    auto it = models.find(model);
    if (it == models.end()) it = models.emplace(model, load(testdata() / "models" / model)).first;
    ASSERT_TRUE(it->second.tok) << model;
    const Tokenizer& tok = *it->second.tok;

    const auto expected = json.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto got = tok.encode(json.at("prompt").get<std::string>(), tok.add_bos_default(),
                                /*parse_special=*/false);
    ++checked;
    if (got == expected) {
      ++pass;
    } else {
      ADD_FAILURE() << path.filename() << "\n  expected " << ids_to_string(expected)
                    << "\n  got      " << ids_to_string(got);
    }
  }
  std::cout << "[ golden   ] " << pass << "/" << checked << " prompts\n";
  EXPECT_GT(checked, 0u);
  EXPECT_EQ(pass, checked);
}

TEST(GoldenPrompts, BosPolicyFromMetadata) {
  Loaded spm = load(testdata() / "models" / "llama-spm-F16.gguf");
  Loaded l3 = load(testdata() / "models" / "llama-bpe-F16.gguf");
  Loaded qwen = load(testdata() / "models" / "qwen2-F16.gguf");
  ASSERT_TRUE(spm.tok && l3.tok && qwen.tok);
  EXPECT_TRUE(spm.tok->add_bos_default());
  EXPECT_EQ(spm.tok->bos(), 1);
  EXPECT_TRUE(l3.tok->add_bos_default());
  EXPECT_EQ(l3.tok->bos(), 1021);
  EXPECT_EQ(l3.tok->pre_tokenizer(), "llama-bpe");
  EXPECT_FALSE(qwen.tok->add_bos_default());
  EXPECT_EQ(qwen.tok->bos(), 11) << "llama.cpp's fallback for BPE files that name none (not added)";
  EXPECT_EQ(qwen.tok->eos(), 1023);
  EXPECT_TRUE(qwen.tok->warnings().empty());
}

}  // namespace
}  // namespace revis::test
