// POST /v1/embeddings: base64 as OpenAI's float vectors use it, the
// request's shapes and refusals, and a real node's vectors: deterministic,
// of length 1, one per input in order, base64 the same numbers, and equal
// to the engine's own mean hidden state of the same tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "api/embeddings_api.h"
#include "base/base64.h"
#include "net/client.h"
#include "node/node_process.h"
#include "revis/engine.h"
#include "support/testdata.h"

namespace revis {
namespace {

using nlohmann::json;
using testing::NodeProcess;

TEST(Base64, EncodesAndDecodesTheStandardAlphabet) {
  // RFC 4648's test vectors.
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(revis::base64_encode({reinterpret_cast<const unsigned char*>(plain.data()), plain.size()}), coded);
    EXPECT_EQ(revis::base64_decode(coded), plain);
  }
  EXPECT_EQ(revis::base64_encode(std::vector<unsigned char>{0xfb, 0xff}), "+/8=");
  for (const char* bad : {"Zg=", "Z===", "Zm9v!A==", "Zg==Zg==", "===="}) EXPECT_FALSE(revis::base64_decode(bad)) << bad;
  const std::vector<float> values = {1.0f, -0.5f, 3.25e-7f, 0.0f};
  EXPECT_EQ(revis::floats_base64(std::vector<float>{1.0f}), "AACAPw==") << "1.0f in little-endian float32";
  EXPECT_EQ(revis::floats_from_base64(revis::floats_base64(values)), values);
  EXPECT_FALSE(revis::floats_from_base64("Zm9v")) << "3 bytes are not whole floats";
}

TEST(EmbeddingsApi, ParsesEveryInputShape) {
  auto text = node::parse_embedding_request(R"({"model":"small","input":"Hello"})");
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(text->model, "small");
  ASSERT_EQ(text->inputs.size(), 1u);
  EXPECT_EQ(std::get<std::string>(text->inputs[0]), "Hello");
  EXPECT_FALSE(text->base64);
  auto texts = node::parse_embedding_request(R"({"input":["a","b"],"encoding_format":"base64","user":"x"})");
  ASSERT_TRUE(texts.ok()) << texts.error().message;
  EXPECT_EQ(texts->inputs.size(), 2u);
  EXPECT_TRUE(texts->base64);
  auto tokens = node::parse_embedding_request(R"({"input":[1,2,3]})");
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  ASSERT_EQ(tokens->inputs.size(), 1u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(tokens->inputs[0]), (std::vector<int32_t>{1, 2, 3}));
  auto token_lists = node::parse_embedding_request(R"({"input":[[1,2],[3]],"encoding_format":"float"})");
  ASSERT_TRUE(token_lists.ok()) << token_lists.error().message;
  EXPECT_EQ(token_lists->inputs.size(), 2u);

  json too_many = {{"input", json::array()}};
  for (size_t i = 0; i <= node::kMaxEmbeddingInputs; ++i) too_many["input"].push_back("x");
  const std::pair<std::string, const char*> refused[] = {
      {R"({"model":"small"})", "input"},
      {R"({"input":""})", "input"},
      {R"({"input":[]})", "input"},
      {R"({"input":["a",""]})", "input[1]"},
      {R"({"input":["a",[1]]})", "ok"},
      {R"({"input":["a",{}]})", "input[1]"},
      {R"({"input":[1,-2]})", "input[1]"},
      {R"({"input":[[1],[]]})", "input[1]"},
      {R"({"input":"a","encoding_format":"int8"})", "encoding_format"},
      {R"({"input":"a","dimensions":64})", "dimensions"},
      {R"({"input":"a","model":5})", "model"},
      {too_many.dump(), "2048"},
  };
  for (const auto& [body, names] : refused) {
    auto r = node::parse_embedding_request(body);
    if (std::string(names) == "ok") {  // texts and token lists may mix, as OpenAI's may
      EXPECT_TRUE(r.ok()) << body;
      continue;
    }
    ASSERT_FALSE(r.ok()) << body.substr(0, 80);
    EXPECT_EQ(r.error().code, node::ErrorCode::kBadRequest);
    EXPECT_NE(r.error().message.find(names), std::string::npos) << r.error().message;
  }
}

class EmbeddingsNode : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    node_ = new NodeProcess({"--tier", "small=" + testing::testdata("models/qwen2-Q8_0.gguf").string(), "-t", "2",
                             "-c", "512"});
    ASSERT_TRUE(node_->wait_ready()) << node_->log();
  }
  static void TearDownTestSuite() {
    delete node_;
    node_ = nullptr;
  }
  static node::HttpResponse post(const json& body) {
    auto r = node::http_request(node_->endpoint(), "POST", "/v1/embeddings", body.dump(),
                                {{"Content-Type", "application/json"}}, 120000);
    if (!r.ok()) throw std::runtime_error(r.status().message());
    return *r;
  }
  // The vectors of a 200 answer, in order; base64 ones decoded.
  static std::vector<std::vector<float>> vectors(const node::HttpResponse& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::vector<float>> out;
    if (r.status != 200) return out;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["object"], "list");
    for (size_t i = 0; i < j["data"].size(); ++i) {
      const json& d = j["data"][i];
      EXPECT_EQ(d["object"], "embedding");
      EXPECT_EQ(d["index"], i);
      if (d["embedding"].is_string()) out.push_back(revis::floats_from_base64(d["embedding"].get<std::string>()).value());
      else out.push_back(d["embedding"].get<std::vector<float>>());
    }
    return out;
  }
  static NodeProcess* node_;
};
NodeProcess* EmbeddingsNode::node_ = nullptr;

double norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

TEST_F(EmbeddingsNode, VectorsAreDeterministicNormalisedAndPerInput) {
  auto r = post({{"model", "small"}, {"input", "The cat sat on the mat."}});
  const auto first = vectors(r);
  ASSERT_EQ(first.size(), 1u);
  const json j = json::parse(r.body);
  EXPECT_EQ(j["model"], "small");
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 3);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"]);
  EXPECT_NEAR(norm(first[0]), 1.0, 1e-5);
  EXPECT_EQ(vectors(post({{"input", "The cat sat on the mat."}}))[0], first[0]) << "the same text, the same vector";

  const auto both = vectors(post({{"input", {"The cat sat on the mat.", "Stock prices fell sharply today."}}}));
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], first[0]) << "an input's vector does not depend on the others";
  EXPECT_NE(both[1], both[0]);
  EXPECT_NEAR(norm(both[1]), 1.0, 1e-5);

  const auto coded = vectors(post({{"input", {"The cat sat on the mat."}}, {"encoding_format", "base64"}}));
  ASSERT_EQ(coded.size(), 1u);
  EXPECT_EQ(coded[0], first[0]) << "base64 holds the same float32 values";
}

// The node's vector is the engine's mean hidden state of the text's tokens
// (BOS as the model asks), scaled to length 1; token ids give the same.
TEST_F(EmbeddingsNode, AVectorIsTheEnginesMeanHiddenStateScaledToLengthOne) {
  const std::string text = "Embeddings pool the final hidden states.";
  auto engine = Engine::load(
      {.model_path = testing::testdata("models/qwen2-Q8_0.gguf").string(), .n_ctx = 512, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  const std::vector<int32_t> tokens = (*engine)->tokenize(text, (*engine)->add_bos_default(), false);
  auto mean = (*engine)->new_session()->mean_hidden_state(tokens);
  ASSERT_TRUE(mean.ok()) << mean.status().message();
  const double length = norm(*mean);

  auto r = post({{"input", text}});
  const auto served = vectors(r);
  ASSERT_EQ(served.size(), 1u);
  ASSERT_EQ(served[0].size(), mean->size());
  for (size_t i = 0; i < mean->size(); ++i) ASSERT_NEAR(served[0][i], (*mean)[i] / length, 1e-6) << "value " << i;
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], tokens.size());
  EXPECT_EQ(vectors(post({{"input", tokens}}))[0], served[0]);
}

TEST_F(EmbeddingsNode, RefusalsNameWhatIsWrong) {
  std::string words;
  for (int i = 0; i < 800; ++i) words += "x ";  // more tokens than the 512 of the context
  auto too_long = post({{"input", {"short", words}}});
  EXPECT_EQ(too_long.status, 400) << too_long.body.substr(0, 200);
  const json e = json::parse(too_long.body)["error"];
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_NE(e["message"].get<std::string>().find("input[1]"), std::string::npos) << e.dump();

  auto outside = post({{"input", {1, 2, 99999999}}});
  EXPECT_EQ(outside.status, 400) << outside.body;
  EXPECT_NE(outside.body.find("vocabulary"), std::string::npos) << outside.body;
  auto dimensions = post({{"input", "x"}, {"dimensions", 8}});
  EXPECT_EQ(dimensions.status, 400) << dimensions.body;
  EXPECT_NE(dimensions.body.find("dimensions"), std::string::npos) << dimensions.body;
  auto get = node::http_request(node_->endpoint(), "GET", "/v1/embeddings", "", {}, 10000);
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->status, 405);
}

}  // namespace
}  // namespace revis
