// End-to-end tests of the `revis` command line: what a user types, what
// comes out, and how failures are reported.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "net/client.h"
#include "support/golden.h"
#include "support/run_command.h"
#include "support/terminal.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;
using testing::TempDir;
using namespace std::chrono_literals;

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

TEST(RunCommand, SpeculativeFlagsKeepTheTextAndReportDrafts) {
  const std::string base = "run -m " + shell_quote(model("llama-bpe-Q8_0")) +
                           " -p 'The cat sat on the mat. The cat sat on the' -n 20 --temp 0 --ignore-eos --json";
  const auto plain = run_revis(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const nlohmann::json p = nlohmann::json::parse(plain.out);
  EXPECT_EQ(p["draft_tokens"], 0);
  for (const std::string& flags : {std::string(" --lookup --draft-max 4"), " --draft " + shell_quote(model("llama-bpe-Q4_0"))}) {
    const auto r = run_revis(base + flags);
    ASSERT_EQ(r.exit_code, 0) << flags << ": " << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["text"], p["text"]) << flags;
    EXPECT_GT(j["draft_tokens"].get<int>(), 0) << flags;
    EXPECT_LE(j["accepted_tokens"].get<int>(), j["draft_tokens"].get<int>()) << flags;
    EXPECT_NE(r.err.find("speculative: drafted"), std::string::npos) << r.err;
  }
  const auto refused = run_revis(base + " --draft " + shell_quote(model("llama-spm-Q4_0")));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("vocabulary"), std::string::npos) << refused.err;
  EXPECT_NE(run_revis(base + " --lookup --draft-max 0").exit_code, 0) << "--draft-max is 1..64";
}

// --draft mtp: a deepseek2 file from mkmodel --nextn 1 drafts with its own
// head and keeps the text; a model without one is refused by saying so.
TEST(RunCommand, DraftMtpUsesTheModelsOwnHead) {
  TempDir tmp;
  const std::string path = tmp.file("v3.gguf");
  const auto mk = run_revis("mkmodel --like deepseek-v3-small --embd 128 --layers 2 --vocab 512 --nextn 1 -o " +
                            shell_quote(path));
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  const std::string base = "run -m " + shell_quote(path) + " -p 'The cat sat on the mat.' -n 16 --temp 0 --ignore-eos --json";
  const auto plain = run_revis(base);
  const auto mtp = run_revis(base + " --draft mtp --draft-max 3");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(mtp.exit_code, 0) << mtp.err;
  const nlohmann::json p = nlohmann::json::parse(plain.out), j = nlohmann::json::parse(mtp.out);
  EXPECT_EQ(j["text"], p["text"]);
  EXPECT_GT(j["draft_tokens"].get<int>(), 0);
  const auto refused = run_revis("run -m " + shell_quote(model("llama-bpe-Q8_0")) + " -p 'Hi' -n 2 --draft mtp");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("no multi-token-prediction block"), std::string::npos) << refused.err;
}

// Hybrids draft too: a qwen35 file from mkmodel --nextn 1 keeps its text
// with its MTP head, with itself as the draft model and with prompt lookup.
TEST(RunCommand, DraftsOnAHybridKeepTheText) {
  TempDir tmp;
  const std::string path = tmp.file("qwen35.gguf");
  const auto mk = run_revis("mkmodel --arch qwen35 --vocab 512 --nextn 1 -o " + shell_quote(path));
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  const std::string base = "run -m " + shell_quote(path) + " -p 'The cat sat on the mat.' -n 16 --temp 0 --ignore-eos --json";
  const auto plain = run_revis(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const nlohmann::json p = nlohmann::json::parse(plain.out);
  for (const std::string& flags : {std::string(" --draft mtp"), " --draft " + shell_quote(path), std::string(" --lookup")}) {
    const auto r = run_revis(base + flags + " --draft-max 3");
    ASSERT_EQ(r.exit_code, 0) << flags << ": " << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["text"], p["text"]) << flags;
    EXPECT_GT(j["draft_tokens"].get<int>(), 0) << flags;
  }
}

// --grammar and --json-schema hold a random-weight model's sampled output
// to them; a grammar that does not compile is a usage error naming the flag.
TEST(RunCommand, GrammarAndJsonSchemaHoldTheOutput) {
  const std::string base = "run -m " + shell_quote(model("qwen2-Q8_0")) + " -p 'Answer:' -n 200 --temp 1 --json";
  for (int seed = 1; seed <= 3; ++seed) {
    const auto r = run_revis(base + " --seed " + std::to_string(seed) + " --grammar " +
                             shell_quote("root ::= (\"yes\" | \"no\") \".\""));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string text = nlohmann::json::parse(r.out)["text"];
    EXPECT_TRUE(text == "yes." || text == "no.") << text;
  }
  TempDir tmp;
  const std::string schema = R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 9},
    "tag": {"enum": ["a", "b"]}}, "required": ["n", "tag"]})";
  std::ofstream(tmp.file("schema.json")) << schema;
  for (const std::string& flag : {"-j " + shell_quote(schema), "--json-schema-file " + shell_quote(tmp.file("schema.json"))}) {
    const auto r = run_revis(base + " --seed 5 " + flag);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto answer = nlohmann::json::parse(nlohmann::json::parse(r.out)["text"].get<std::string>());
    EXPECT_GE(answer["n"].get<int>(), 3) << answer;
    EXPECT_LE(answer["n"].get<int>(), 9) << answer;
    EXPECT_TRUE(answer["tag"] == "a" || answer["tag"] == "b") << answer;
  }
  const auto bad = run_revis(base + " --grammar 'root ::= missing'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--grammar: "), std::string::npos) << bad.err;
  const auto both = run_revis(base + " --grammar 'root ::= \"x\"' -j '{}'");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("both given"), std::string::npos) << both.err;
  const auto ignoring = run_revis(base + " --ignore-eos --grammar 'root ::= \"x\"'");
  EXPECT_EQ(ignoring.exit_code, 2) << ignoring.err;
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

// `--arch NAME` and nothing else: a small file of every architecture
// (the mixtures of experts, deepseek4, gemma3, gemma4, gpt-oss and qwen35 from their miniatures),
// which revis runs. llama.cpp loads the same files (docs/formats.md).
TEST(MkmodelCommand, AnArchitectureAloneMakesASmallFileThatRuns) {
  TempDir tmp;
  for (const char* arch :
       {"llama", "qwen2", "qwen3", "qwen3moe", "deepseek2", "deepseek4", "gemma3", "gemma4", "gpt-oss", "qwen35",
        "qwen35moe", "qwen3next"}) {
    const std::string path = tmp.file(std::string(arch) + ".gguf");
    const auto mk = run_revis(std::string("mkmodel --arch ") + arch + " -o " + shell_quote(path));
    ASSERT_EQ(mk.exit_code, 0) << arch << ": " << mk.err;
    EXPECT_LT(std::filesystem::file_size(path), 32u << 20) << arch;
    const auto r = run_revis("run -m " + shell_quote(path) + " -p 'Hello there' -n 2 --temp 0 --json");
    ASSERT_EQ(r.exit_code, 0) << arch << ": " << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["gen_tokens"], 2) << arch;
  }
}

// V4 Flash's shape: --dry-run counts the full file without writing it;
// narrowed (width, experts, vocabulary) but with its own blocks, indexer,
// output groups and hash-routed layers, it writes a file revis runs past
// the window.
TEST(MkmodelCommand, TheV4FlashShapeCountsAndRunsNarrowed) {
  TempDir tmp;
  const auto dry = run_revis("mkmodel --like deepseek-v4-flash --type MOE-2BIT --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("43 layers: 1328 tensors"), std::string::npos) << dry.out;
  EXPECT_EQ(run_revis("mkmodel --like deepseek-v4-flash").exit_code, 2);  // no --output, no --dry-run

  const std::string path = tmp.file("m.gguf");
  const auto mk = run_revis("mkmodel --like deepseek-v4-flash --layers 4 --embd 256 --heads 8 --experts 8 "
                            "--ff-expert 128 --vocab 512 --type Q8_0 -o " + shell_quote(path));
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  std::string command = "run -n 2 --temp 0 --json -m " + shell_quote(path);
  command.append(" -p ").append(600, 'a');  // 600 tokens: past the window of 128
  const auto r = run_revis(command);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["gen_tokens"], 2);
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
  const std::string cmd = "demo -n 8 --exit --cache-dir " + shell_quote(tmp.path().string());
  const auto first = run_revis(cmd);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("RANDOM"), std::string::npos);
  EXPECT_EQ(first.err.find('\r'), std::string::npos) << "progress in a log is plain lines\n" << first.err;
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "revis-tiny-Q8_0.gguf"));
  const auto second = run_revis(cmd);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.err.find("creating demo model"), std::string::npos) << "the cached model is reused";
  EXPECT_EQ(first.out, second.out) << "the demo is seeded";
}

// Without --exit the demo ends with the dashboard's URL and keeps both
// nodes up (the page is served there) until it is interrupted.
TEST(DemoCommand, KeepsTheNodesUpForTheDashboardUntilInterrupted) {
  TempDir tmp;
  const std::string err = tmp.file("stderr");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!std::freopen(err.c_str(), "w", stderr) || !std::freopen("/dev/null", "w", stdout)) _exit(127);
    const std::string dir = tmp.path().string();
    execl(REVIS_BINARY, REVIS_BINARY, "demo", "-n", "4", "--tickets", "2", "--cache-dir", dir.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  const std::regex url(R"(dashboard: http://127\.0\.0\.1:(\d+)/)");
  std::smatch found;
  std::string text;
  for (int i = 0; i < 1200 && !std::regex_search(text, found, url); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(err);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_FALSE(found.empty()) << text;
  EXPECT_NE(text.find("Ctrl-C"), std::string::npos);
  auto page = node::http_request({"127.0.0.1", std::stoi(found[1])}, "GET", "/", "", {}, 10000);
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<title>revis"), std::string::npos);
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// ---------------------------------------------------------------- progress

// With stderr in a file, progress is a few plain lines with percent and
// time, never a \r redraw.
TEST(Progress, LogsGetPlainLines) {
  TempDir tmp;
  const auto mk = run_revis("mkmodel --like tiny --type Q8_0 -o " + shell_quote(tmp.file("m.gguf")));
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  EXPECT_EQ(mk.err.find('\r'), std::string::npos) << mk.err;
  EXPECT_NE(mk.err.find("100% in "), std::string::npos) << mk.err;

  // A long prompt shows how far its prefill is.
  std::string prompt;
  for (int i = 0; i < 700; ++i) prompt += "word ";  // 700 tokens or more, 5 a word at most (bytes)
  const auto run = run_revis("run -m " + shell_quote(model("llama-spm-Q8_0")) + " -c 4096 -n 1 --json -p " +
                             shell_quote(prompt));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find('\r'), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("prompt ["), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("100% in "), std::string::npos) << run.err;
  const auto short_run = run_revis("run -m " + shell_quote(model("llama-spm-Q8_0")) + " -n 1 --json -p hi");
  EXPECT_EQ(short_run.err.find("prompt ["), std::string::npos) << short_run.err;

  const auto quantize = run_revis("quantize " + shell_quote(tmp.file("m.gguf")) + " " + shell_quote(tmp.file("q.gguf")) +
                                  " Q4_0");
  ASSERT_EQ(quantize.exit_code, 0) << quantize.err;
  EXPECT_EQ(quantize.err.find('\r'), std::string::npos) << quantize.err;
  EXPECT_NE(quantize.err.find("quantizing ["), std::string::npos) << quantize.err;
}

// kv bench: a cold prefill (with its progress, plain lines in a log), then
// resumes of its checkpoint from disk and from RAM, all with the same logits.
TEST(KvBenchCommand, ResumesGiveTheColdLogits) {
  TempDir tmp;
  const auto bench = run_revis("kv bench -m " + shell_quote(model("llama-spm-Q8_0")) + " -p 768 -r 1 -t 2 --kv-dir " +
                               shell_quote(tmp.file("kv")));
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.out.find("logits          bit-identical to the cold prefill's"), std::string::npos) << bench.out;
  EXPECT_EQ(bench.err.find('\r'), std::string::npos) << bench.err;
  EXPECT_NE(bench.err.find("cold prefill [768/768] 100% in "), std::string::npos) << bench.err;
}

// On a terminal the same progress is one line redrawn in place.
TEST(Progress, TerminalsGetOneRedrawnLine) {
  TempDir tmp;
  testing::Terminal mk({"mkmodel", "--like", "tiny", "--type", "Q8_0", "-o", tmp.file("m.gguf")});
  ASSERT_EQ(mk.wait_exit(120s), 0) << mk.output();
  // The terminal turns every \n into \r\n: a redraw is a \r before the verb.
  size_t redraws = 0;
  for (size_t at = mk.output().find("\rgenerating ["); at != std::string::npos;
       at = mk.output().find("\rgenerating [", at + 1))
    ++redraws;
  EXPECT_GE(redraws, 2u) << mk.output();
  EXPECT_NE(mk.output().find("100% in "), std::string::npos) << mk.output();
}

// ---------------------------------------------------------------- the command line

TEST(CommandLine, MistypedNamesGetTheNearestOneAndExitTwo) {
  const auto command = run_revis("runn -m x.gguf -p hi");
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_NE(command.err.find("unknown command 'runn'; did you mean 'run'?"), std::string::npos) << command.err;

  const auto option = run_revis("run -m x.gguf -p hi --tmep 0");
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_NE(option.err.find("unknown option '--tmep' for 'run'; did you mean '--temp'?"), std::string::npos)
      << option.err;

  const auto nested = run_revis("kv lss --kv-dir /nonexistent");
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_NE(nested.err.find("did you mean 'ls'?"), std::string::npos) << nested.err;

  const auto missing = run_revis("run -p hi");
  EXPECT_EQ(missing.exit_code, 2) << "a required option is a usage error";

  const auto runtime = run_revis("run -m /nonexistent.gguf -p hi");
  EXPECT_EQ(runtime.exit_code, 1) << runtime.err;

  const auto help = run_revis("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("2 the command line is wrong"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("REVIS_PORT"), std::string::npos) << help.out;
}

TEST(CommandLine, LlamaCppHabitsWork) {
  const std::string base = "run -m " + shell_quote(model("llama-spm-Q8_0")) + " -p 'Hello world' --temp 0 --json";
  // -ngl is llama.cpp's, not -n gl; on the CPU a note says it does nothing.
  const auto ngl = run_revis(base + " -ngl 99 -n 3");
  ASSERT_EQ(ngl.exit_code, 0) << ngl.err;
  EXPECT_NE(ngl.err.find("-ngl 99 does nothing on the CPU"), std::string::npos) << ngl.err;
  EXPECT_EQ(nlohmann::json::parse(ngl.out)["gen_tokens"], 3);

  // A repeated option: the last one wins.
  const auto repeated = run_revis(base + " -n 9 -n 2");
  ASSERT_EQ(repeated.exit_code, 0) << repeated.err;
  EXPECT_EQ(nlohmann::json::parse(repeated.out)["gen_tokens"], 2);
  const auto two_prompts = run_revis("run -m " + shell_quote(model("llama-spm-Q8_0")) +
                                     " -p 'Goodbye and farewell to all' --temp 0 --json -n 2 -p 'Hello world'");
  ASSERT_EQ(two_prompts.exit_code, 0) << two_prompts.err;
  EXPECT_EQ(nlohmann::json::parse(two_prompts.out)["prompt_tokens"], nlohmann::json::parse(repeated.out)["prompt_tokens"]);
  EXPECT_EQ(nlohmann::json::parse(two_prompts.out)["text"], nlohmann::json::parse(repeated.out)["text"]);

  // -n -1: until end of generation or a full context (of 16 here).
  const auto unlimited = run_revis(base + " -c 16 -n -1 --ignore-eos");
  ASSERT_EQ(unlimited.exit_code, 0) << unlimited.err;
  const nlohmann::json u = nlohmann::json::parse(unlimited.out);
  EXPECT_EQ(u["stop_reason"], "context");
  // The last token needs no room in the context.
  EXPECT_EQ(u["prompt_tokens"].get<int>() + u["gen_tokens"].get<int>(), 16 + 1) << unlimited.out;
  EXPECT_EQ(run_revis(base + " -n -2").exit_code, 2);
}

TEST(CommandLine, RunTakesThePromptFromStandardInput) {
  TempDir tmp;
  std::ofstream(tmp.file("prompt")) << "Hello world";
  const std::string base = "run -m " + shell_quote(model("llama-spm-Q8_0")) + " -n 4 --temp 0 --json";
  const auto piped = run_revis(base + " <" + shell_quote(tmp.file("prompt")));
  const auto given = run_revis(base + " -p 'Hello world'");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(nlohmann::json::parse(piped.out)["text"], nlohmann::json::parse(given.out)["text"]);
  EXPECT_EQ(nlohmann::json::parse(piped.out)["prompt_tokens"], nlohmann::json::parse(given.out)["prompt_tokens"]);
}

// With neither -p nor -f, and a terminal for standard input, there is no
// prompt to read: run says so instead of waiting for one.
TEST(CommandLine, RunOnATerminalWithoutAPromptSaysSo) {
  testing::Terminal run({"run", "-m", model("llama-spm-Q8_0"), "-n", "1"});
  EXPECT_EQ(run.wait_exit(60s), 2) << run.output();
  EXPECT_NE(run.output().find("run needs a prompt: -p TEXT, -f FILE, or text on standard input"), std::string::npos)
      << run.output();
}

TEST(CommandLine, ContextAboveTheTrainedOneIsWarnedAbout) {
  const std::string path = model("llama-spm-Q8_0");
  const auto info = run_revis("inspect --json " + shell_quote(path));
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const int trained = nlohmann::json::parse(info.out)["metadata"]["llama.context_length"];
  const std::string base = "run -m " + shell_quote(path) + " -p hi -n 1 --json -c ";
  const auto above = run_revis(base + std::to_string(trained * 2));
  ASSERT_EQ(above.exit_code, 0) << above.err;
  EXPECT_NE(above.err.find("above the " + std::to_string(trained) + " tokens this model was trained on"),
            std::string::npos)
      << above.err;
  const auto within = run_revis(base + std::to_string(trained));
  EXPECT_EQ(within.err.find("trained on"), std::string::npos) << within.err;

  // The same model with linear RoPE scaling (x4) is made for longer contexts.
  TempDir tmp;
  auto in = gguf::GgufFile::open(path);
  ASSERT_TRUE(in.ok()) << in.status().message();
  gguf::GgufWriter scaled;
  scaled.copy_metadata(**in);
  scaled.set_string("llama.rope.scaling.type", "linear");
  scaled.set_f32("llama.rope.scaling.factor", 4);
  for (const gguf::TensorInfo& t : (*in)->tensors())
    ASSERT_TRUE(scaled.add_tensor(t.name, t.type, t.dims, t.data, t.n_bytes).ok()) << t.name;
  ASSERT_TRUE(scaled.write(tmp.file("scaled.gguf")).ok());
  const auto with_scaling = run_revis("run -m " + shell_quote(tmp.file("scaled.gguf")) + " -p hi -n 1 --json -c " +
                                      std::to_string(trained * 2));
  ASSERT_EQ(with_scaling.exit_code, 0) << with_scaling.err;
  EXPECT_EQ(with_scaling.err.find("trained on"), std::string::npos) << with_scaling.err;
}

TEST(CommandLine, InspectAndTokenizeSpeakJson) {
  const auto info = run_revis("inspect --json " + shell_quote(model("qwen3moe-Q4_K_M")));
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const nlohmann::json j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["metadata"]["general.architecture"], "qwen3moe");
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"].size(), 1024u) << "arrays in full";
  bool found = false;
  for (const nlohmann::json& t : j["tensors"])
    if (t["name"] == "blk.1.ffn_down_exps.weight") found = t["shape"] == nlohmann::json({256, 256, 8});
  EXPECT_TRUE(found) << info.out.substr(0, 400);

  const std::string m = shell_quote(model("llama-spm-F16"));
  const auto ids = run_revis("tokenize -m " + m + " -p 'Hello world'");
  const auto tokens = run_revis("tokenize --json -m " + m + " -p 'Hello world'");
  ASSERT_EQ(tokens.exit_code, 0) << tokens.err;
  const nlohmann::json t = nlohmann::json::parse(tokens.out);
  std::string joined;
  for (int id : t["ids"]) joined += (joined.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(joined + "\n", ids.out);
  ASSERT_EQ(t["pieces"].size(), t["ids"].size());
  std::string text;
  for (const auto& piece : t["pieces"]) text += piece.get<std::string>();
  EXPECT_NE(text.find("world"), std::string::npos) << tokens.out;
}

// REVIS_HOST/PORT/MODEL sit between the file and the flags. validate_config
// stops serve before it binds anything, and its message shows which won.
TEST(CommandLine, ServeReadsTheEnvironmentBetweenFileAndFlags) {
  TempDir tmp;
  std::ofstream(tmp.file("node.toml")) << "host = \"10.1.2.3\"\nengine = \"sim\"\n";
  const std::string config = " serve --config " + shell_quote(tmp.file("node.toml"));
  const auto file = run_revis(config);
  EXPECT_NE(file.err.find("refusing to listen on 10.1.2.3"), std::string::npos) << file.err;
  const auto from_env = run_revis(config, "REVIS_HOST=10.9.9.9");
  EXPECT_EQ(from_env.exit_code, 1);
  EXPECT_NE(from_env.err.find("refusing to listen on 10.9.9.9"), std::string::npos) << from_env.err;
  const auto flag = run_revis(config + " --host 10.7.7.7", "REVIS_HOST=10.9.9.9");
  EXPECT_NE(flag.err.find("refusing to listen on 10.7.7.7"), std::string::npos) << flag.err;
  const auto bad_port = run_revis(config, "REVIS_PORT=80x");
  EXPECT_EQ(bad_port.exit_code, 2);
  EXPECT_NE(bad_port.err.find("REVIS_PORT=80x"), std::string::npos) << bad_port.err;
}

}  // namespace
}  // namespace revis
