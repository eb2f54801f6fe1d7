// End-to-end tests of the `revis` command line: what a user types, what
// comes out, and how failures are reported.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "support/golden.h"
#include "support/run_command.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;
using testing::TempDir;

std::string model(const std::string& stem) { return testing::testdata("models/" + stem + ".gguf").string(); }

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Teacher-forced comparison is in the engine tests; here the logits file of
// `revis run --logits-out` must have the golden shape and agree with golden,
// for grouped-query and for DeepSeek's latent attention.
class RunGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(RunGolden, LogitsOutMatchesGoldenFile) {
  const testing::GoldenCase g = testing::load_golden(GetParam());
  TempDir tmp;
  const auto r = run_revis("run -m " + shell_quote(g.model_file) + " -p " + shell_quote(g.prompt) +
                           " -n 32 --temp 0 -t 2 --logits-out " + shell_quote(tmp.file("l.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read_json(tmp.file("l.json"));
  EXPECT_EQ(j["prompt_tokens"].get<std::vector<int32_t>>(), g.prompt_tokens);
  ASSERT_EQ(j["prompt_logits"].size(), g.prompt_tokens.size());
  ASSERT_EQ(j["greedy_logits"].size(), g.greedy.size() - 1);
  ASSERT_EQ(j["greedy"].size(), g.greedy.size());
  for (size_t k = 0; k < g.prompt_tokens.size(); ++k) {
    const std::vector<float> row = j["prompt_logits"][k].get<std::vector<float>>();
    ASSERT_EQ(static_cast<int>(row.size()), g.n_vocab);
    EXPECT_LE(testing::logit_error(row.data(), g.row(static_cast<int>(k)), g.n_vocab), 0.30) << "position " << k;
  }
  const std::vector<int32_t> greedy = j["greedy"].get<std::vector<int32_t>>();
  const int n_prompt = static_cast<int>(g.prompt_tokens.size());
  for (size_t i = 0; i < greedy.size() && testing::is_clear(g.row(n_prompt - 1 + int(i)), g.n_vocab); ++i)
    ASSERT_EQ(greedy[i], g.greedy[i]) << "greedy token " << i;
}

INSTANTIATE_TEST_SUITE_P(RunCommand, RunGolden, ::testing::Values("qwen3-Q4_K_M.en", "deepseek2/deepseek2-F16.en"),
                         [](const auto& info) { return info.param == "qwen3-Q4_K_M.en" ? "Qwen3" : "Deepseek2"; });

TEST(RunCommand, JsonReportsCountsAndText) {
  const auto r = run_revis("run -m " + shell_quote(model("llama-spm-Q8_0")) + " -p 'Hello world' -n 5 --temp 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gen_tokens"], 5);
  EXPECT_GT(j["prompt_tokens"].get<int>(), 1);
  EXPECT_EQ(j["cached_tokens"], 0);
  EXPECT_TRUE(j["text"].is_string());
  EXPECT_GE(j["ttft_ms"].get<double>(), 0.0);
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << "timing goes to stderr";
}

TEST(RunCommand, SameSeedSameText) {
  const std::string cmd = "run -m " + shell_quote(model("qwen2-Q4_0")) + " -p 'Once upon a time' -n 24 --temp 1 --seed 7 --json";
  const auto a = run_revis(cmd), b = run_revis(cmd);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["text"], nlohmann::json::parse(b.out)["text"]);
}

TEST(RunCommand, StopStringEndsGenerationAndIsNotPrinted) {
  // Find what greedy decoding produces, then stop on a piece of it.
  const std::string base = "run -m " + shell_quote(model("llama-spm-F16")) + " -p 'The quick brown fox' --temp 0 --json";
  const auto full = run_revis(base + " -n 16");
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const std::string text = nlohmann::json::parse(full.out)["text"];
  ASSERT_GE(text.size(), 6u);
  const std::string stop = text.substr(text.size() / 2, 3);
  const auto stopped = run_revis(base + " -n 16 --stop " + shell_quote(stop));
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  const nlohmann::json j = nlohmann::json::parse(stopped.out);
  EXPECT_EQ(j["stop_reason"], "stop");
  EXPECT_EQ(j["text"], text.substr(0, text.find(stop)));
}

TEST(RunCommand, ErrorsAreOneLineAndNonZero) {
  TempDir tmp;
  const auto missing = run_revis("run -m " + shell_quote(tmp.file("nope.gguf")) + " -p hi");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("nope.gguf"), std::string::npos) << missing.err;

  const auto too_long = run_revis("run -m " + shell_quote(model("llama-spm-Q8_0")) + " -c 8 -p " +
                                  shell_quote("a prompt that is certainly longer than eight tokens, by far"));
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(too_long.err.find("context"), std::string::npos) << too_long.err;

  // A GGUF of an architecture revis does not know.
  gguf::GgufWriter w;
  w.set_string("general.architecture", "gpt9");
  ASSERT_TRUE(w.write(tmp.file("gpt9.gguf")).ok());
  const auto unknown = run_revis("run -m " + shell_quote(tmp.file("gpt9.gguf")) + " -p hi");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("gpt9"), std::string::npos) << unknown.err;

  // Truncated model file.
  std::vector<uint8_t> bytes = testing::read_bytes(model("qwen2-Q4_0"));
  bytes.resize(bytes.size() / 2);
  std::ofstream(tmp.file("half.gguf"), std::ios::binary).write(reinterpret_cast<char*>(bytes.data()), bytes.size());
  const auto truncated = run_revis("run -m " + shell_quote(tmp.file("half.gguf")) + " -p hi");
  EXPECT_NE(truncated.exit_code, 0);
  EXPECT_NE(truncated.err.find("truncated"), std::string::npos) << truncated.err;
}

TEST(TokenizeCommand, MatchesVocabularyReference) {
  // The first case of each reference file, through the command line.
  for (const char* vocab : {"llama-spm", "gpt-2", "deepseek-llm"}) {
    const std::string base = testing::testdata(std::string("vocab/ggml-vocab-") + vocab + ".gguf").string();
    std::ifstream inp(base + ".inp"), out(base + ".out");
    std::stringstream all;
    all << inp.rdbuf();
    const std::string text = all.str().substr(0, all.str().find("\n__ggml_vocab_test__\n"));
    std::string expected;
    std::getline(out, expected);
    expected.erase(0, expected.find_first_not_of(' '));  // the reference lines start with a space
    const auto r = run_revis("tokenize --no-bos -m " + shell_quote(base) + " -p " + shell_quote(text));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected + "\n") << vocab;
  }
}

TEST(TokenizeCommand, AddsBosAsMetadataSays) {
  const auto with_bos = run_revis("tokenize -m " + shell_quote(model("llama-spm-F16")) + " -p Hello");
  const auto without = run_revis("tokenize --no-bos -m " + shell_quote(model("llama-spm-F16")) + " -p Hello");
  ASSERT_EQ(with_bos.exit_code, 0) << with_bos.err;
  EXPECT_EQ(with_bos.out.rfind("1 ", 0), 0u) << with_bos.out;  // <s> is id 1
  EXPECT_EQ(with_bos.out.substr(2), without.out);
}

TEST(InspectCommand, ShowsMetadataAndTensorTable) {
  const auto r = run_revis("inspect " + shell_quote(model("qwen3moe-Q4_K_M")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("qwen3moe.expert_count"), std::string::npos);
  EXPECT_NE(r.out.find("blk.1.ffn_down_exps.weight"), std::string::npos);
  EXPECT_NE(r.out.find("[256, 256, 8]"), std::string::npos);
  EXPECT_NE(r.out.find("(1024 string)"), std::string::npos) << "long arrays are abbreviated";
}

// The largest teacher-forced prompt error of a logits file against golden rows.
double worst_prompt_error(const nlohmann::json& logits, const testing::GoldenCase& gold) {
  double worst = 0;
  for (size_t k = 0; k < gold.prompt_tokens.size(); ++k) {
    const std::vector<float> row = logits["prompt_logits"][k].get<std::vector<float>>();
    worst = std::max(worst, testing::logit_error(row.data(), gold.row(static_cast<int>(k)), gold.n_vocab));
  }
  return worst;
}

// Quantizing the F16 file must cost no more accuracy than llama.cpp's own
// quantizer does: our file's logits against llama.cpp's F16 logits may be at
// most 15 % further off than llama.cpp's quantized file of the same type.
TEST(QuantizeCommand, OutputLoadsAndIsAsAccurateAsLlamaCppQuantizer) {
  const testing::GoldenCase f16 = testing::load_golden("llama-bpe-F16.en");
  TempDir tmp;
  const auto reference_error = [&](const std::string& type) {
    const testing::GoldenCase q = testing::load_golden("llama-bpe-" + type + ".en");
    double worst = 0;
    for (size_t k = 0; k < f16.prompt_tokens.size(); ++k)
      worst = std::max(worst, testing::logit_error(q.row(static_cast<int>(k)), f16.row(static_cast<int>(k)), f16.n_vocab));
    return worst;
  };
  struct Bound {
    const char* type;
    double max_err;
  };
  // Q5_K_M, Q4_1, Q5_0 and Q5_1 have no llama.cpp file here: each must at
  // least beat the file with fewer bits (Q4_1 stores an offset per block
  // besides Q4_0's scale, Q5_0 and Q5_1 a fifth bit).
  for (const Bound& b : {Bound{"F16", 0.03}, Bound{"Q8_0", 1.15 * reference_error("Q8_0")},
                         Bound{"Q6_K", 1.15 * reference_error("Q6_K")}, Bound{"Q4_K_M", 1.15 * reference_error("Q4_K_M")},
                         Bound{"Q4_0", 1.15 * reference_error("Q4_0")}, Bound{"Q5_K_M", reference_error("Q4_K_M")},
                         Bound{"Q4_1", reference_error("Q4_0")}, Bound{"Q5_0", reference_error("Q4_0")},
                         Bound{"Q5_1", reference_error("Q4_0")}}) {
    const std::string out = tmp.file(std::string(b.type) + ".gguf");
    const auto q = run_revis("quantize " + shell_quote(f16.model_file) + " " + shell_quote(out) + " " + b.type);
    ASSERT_EQ(q.exit_code, 0) << q.err;
    const auto r = run_revis("run -m " + shell_quote(out) + " -p " + shell_quote(f16.prompt) +
                             " -n 1 --temp 0 --logits-out " + shell_quote(tmp.file("l.json")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const double err = worst_prompt_error(read_json(tmp.file("l.json")), f16);
    EXPECT_LE(err, b.max_err) << b.type;
    std::printf("quantize %s: max err vs llama.cpp F16 = %.4f (bound %.4f)\n", b.type, err, b.max_err);
  }
}

TEST(MkmodelCommand, EveryArchitectureGeneratesAndRuns) {
  TempDir tmp;
  const std::string vocab = shell_quote(testing::testdata("vocab/ggml-vocab-gpt-2.gguf").string());
  // The built-in byte vocabulary keeps these fast; one model borrows GPT-2's.
  for (const std::string& flags : std::vector<std::string>{"--arch llama --type Q4_K_M", "--arch qwen2 --type Q8_0 --tied --vocab-from " + vocab,
                                  "--arch qwen3 --head-dim 64 --heads 4 --type Q6_K",
                                  "--arch qwen3moe --experts 4 --experts-used 2 --ff-expert 256 --type Q4_0",
                                  "--like deepseek-v3-small --embd 256 --layers 2 --ff 512 --vocab 512 --type Q4_K_M"}) {
    const std::string path = tmp.file("m.gguf");
    const auto mk = run_revis("mkmodel " + flags + " -o " + shell_quote(path));
    ASSERT_EQ(mk.exit_code, 0) << flags << ": " << mk.err;
    const auto r = run_revis("run -m " + shell_quote(path) + " -p 'Hello there' -n 4 --temp 0 --json");
    ASSERT_EQ(r.exit_code, 0) << flags << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["gen_tokens"], 4) << flags;
  }
}

TEST(MkmodelCommand, SameSeedSameBytes) {
  TempDir tmp;
  ASSERT_EQ(run_revis("mkmodel --like tiny --type Q4_K_M --seed 3 -o " + shell_quote(tmp.file("a.gguf"))).exit_code, 0);
  ASSERT_EQ(run_revis("mkmodel --like tiny --type Q4_K_M --seed 3 -o " + shell_quote(tmp.file("b.gguf"))).exit_code, 0);
  ASSERT_EQ(run_revis("mkmodel --like tiny --type Q4_K_M --seed 4 -o " + shell_quote(tmp.file("c.gguf"))).exit_code, 0);
  EXPECT_EQ(testing::read_bytes(tmp.file("a.gguf")), testing::read_bytes(tmp.file("b.gguf")));
  EXPECT_NE(testing::read_bytes(tmp.file("a.gguf")), testing::read_bytes(tmp.file("c.gguf")));
}

TEST(DemoCommand, CreatesModelOnceAndGenerates) {
  TempDir tmp;
  const std::string cmd = "demo -n 8 --cache-dir " + shell_quote(tmp.path().string());
  const auto first = run_revis(cmd);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("RANDOM"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "revis-tiny-Q8_0.gguf"));
  const auto second = run_revis(cmd);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.err.find("creating demo model"), std::string::npos) << "the cached model is reused";
  EXPECT_EQ(first.out, second.out) << "the demo is seeded";
}

}  // namespace
}  // namespace revis
