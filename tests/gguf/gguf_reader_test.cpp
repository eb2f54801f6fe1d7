// Tests for gguf/gguf.h on the shared test data: every shipped GGUF file
// opens, its tensor table agrees with the bytes on disk, and known values
// (checked beforehand with an independent reader) come back through the
// typed getters. Also: open() errors for paths that are not GGUF files.
#include "gguf/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "support/testdata.h"

namespace revis::gguf {
namespace {

using revis::testing::read_bytes;
using revis::testing::TempDir;
using revis::testing::testdata;

std::vector<std::filesystem::path> gguf_files_in(const std::string& directory) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(testdata(directory)))
    if (entry.path().extension() == ".gguf") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Opens `path`, failing the test (not crashing) when the reader refuses it.
std::unique_ptr<GgufFile> open_or_fail(const std::filesystem::path& path) {
  Result<std::unique_ptr<GgufFile>> result = GgufFile::open(path.string());
  EXPECT_TRUE(result.ok()) << result.status().message();
  if (!result.ok()) return nullptr;
  return std::move(*result);
}

// Everything a valid file must satisfy, checked against the raw bytes read
// separately: sizes follow the block geometry, offsets are aligned, tensors
// do not overlap, and each data pointer shows exactly the bytes at
// data_offset + offset of the file.
void expect_consistent_with_disk(const GgufFile& file, const std::filesystem::path& path) {
  SCOPED_TRACE(path.filename().string());
  const std::vector<uint8_t> disk = read_bytes(path);
  ASSERT_EQ(file.file_size(), disk.size());
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u) << "no shipped file sets general.alignment";
  EXPECT_EQ(file.data_offset() % file.alignment(), 0u);
  // Tensorless files (the vocabularies) end right after the metadata, without padding.
  if (!file.tensors().empty()) {
    EXPECT_LE(file.data_offset(), file.file_size());
  }

  std::set<std::string> keys;
  for (const KeyValue& kv : file.metadata()) EXPECT_TRUE(keys.insert(kv.key).second) << kv.key;
  Result<std::string> architecture = file.get_string("general.architecture");
  ASSERT_TRUE(architecture.ok()) << architecture.status().message();
  EXPECT_FALSE(architecture.value().empty());

  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : file.tensors()) {
    SCOPED_TRACE(t.name);
    ASSERT_FALSE(t.dims.empty());
    ASSERT_LE(t.dims.size(), 4u);
    EXPECT_EQ(t.n_bytes, row_bytes(t.type, t.n_elements()));
    EXPECT_EQ(t.offset % file.alignment(), 0u);
    ASSERT_LE(file.data_offset() + t.offset + t.n_bytes, file.file_size());
    ASSERT_NE(t.data, nullptr);
    EXPECT_EQ(std::memcmp(t.data, disk.data() + file.data_offset() + t.offset, t.n_bytes), 0);
    // All data pointers come from one base: pointer distance equals offset distance.
    const TensorInfo& first = file.tensors().front();
    EXPECT_EQ(t.data - first.data, static_cast<ptrdiff_t>(t.offset) - static_cast<ptrdiff_t>(first.offset));
    EXPECT_EQ(file.tensor(t.name), &t);
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    EXPECT_LE(by_offset[i - 1]->offset + by_offset[i - 1]->n_bytes, by_offset[i]->offset)
        << by_offset[i - 1]->name << " overlaps " << by_offset[i]->name;
}

TEST(GgufReader, EveryShippedModelOpensAndMatchesItsFileType) {
  // general.file_type as llama.cpp numbers it (LLAMA_FTYPE_*), by file suffix.
  const std::map<std::string, int64_t> file_type_by_suffix = {
      {"F16", 1}, {"Q4_0", 2}, {"Q8_0", 7}, {"Q4_K_M", 15}, {"Q6_K", 18}};
  // Tensor and metadata counts per architecture stem, read with an independent parser.
  struct Expected {
    std::string architecture;
    size_t n_tensors;
    size_t n_kv;
  };
  const std::map<std::string, Expected> expected_by_stem = {
      {"llama-spm", {"llama", 21, 22}}, {"llama-bpe", {"llama", 21, 20}}, {"qwen2", {"qwen2", 26, 19}},
      {"qwen3", {"qwen3", 24, 21}},     {"qwen3moe", {"qwen3moe", 27, 24}}};

  const std::vector<std::filesystem::path> files = gguf_files_in("models");
  ASSERT_EQ(files.size(), expected_by_stem.size() * file_type_by_suffix.size());
  for (const std::filesystem::path& path : files) {
    SCOPED_TRACE(path.filename().string());
    std::unique_ptr<GgufFile> file = open_or_fail(path);
    ASSERT_NE(file, nullptr);
    expect_consistent_with_disk(*file, path);

    const std::string stem = path.stem().string();  // e.g. "qwen3moe-Q4_K_M"
    const size_t dash = stem.rfind('-');  // quant suffixes contain no '-', model names may
    const std::string model = stem.substr(0, dash), suffix = stem.substr(dash + 1);
    ASSERT_TRUE(expected_by_stem.count(model)) << model;
    ASSERT_TRUE(file_type_by_suffix.count(suffix)) << suffix;
    const Expected& expected = expected_by_stem.at(model);

    EXPECT_EQ(file->get_string("general.architecture").value(), expected.architecture);
    EXPECT_EQ(file->tensors().size(), expected.n_tensors);
    EXPECT_EQ(file->metadata().size(), expected.n_kv);
    EXPECT_EQ(file->get_int("general.file_type", -1).value(), file_type_by_suffix.at(suffix));
    EXPECT_EQ(file->get_int(expected.architecture + ".embedding_length", -1).value(), 256);
    EXPECT_EQ(file->get_int(expected.architecture + ".block_count", -1).value(), 2);
    EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens").value().size(), 1024u);
    const TensorInfo* embeddings = file->tensor("token_embd.weight");
    ASSERT_NE(embeddings, nullptr);
    EXPECT_EQ(embeddings->dims, (std::vector<int64_t>{256, 1024}));
  }
}

TEST(GgufReader, LlamaSpmQ4KMHasTheKnownLayoutAndValues) {
  std::unique_ptr<GgufFile> file = open_or_fail(testdata("models/llama-spm-Q4_K_M.gguf"));
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(file->get_string("general.name").value(), "synth-llama-spm");
  EXPECT_EQ(file->get_int("llama.embedding_length", 0).value(), 256);
  EXPECT_EQ(file->get_int("llama.context_length", 0).value(), 4096);
  EXPECT_EQ(file->get_int("llama.attention.head_count", 0).value(), 8);
  EXPECT_EQ(file->get_int("llama.attention.head_count_kv", 0).value(), 2);
  EXPECT_EQ(file->get_int("llama.feed_forward_length", 0).value(), 768);
  EXPECT_EQ(file->get_float("llama.rope.freq_base", 0).value(), 10000.0);
  // Stored as f32 1e-5; the getter widens the float exactly rather than re-rounding.
  EXPECT_EQ(file->get_float("llama.attention.layer_norm_rms_epsilon", 0).value(), static_cast<double>(1e-5f));
  EXPECT_TRUE(file->get_bool("tokenizer.ggml.add_bos_token", false).value());
  EXPECT_FALSE(file->get_bool("tokenizer.ggml.add_eos_token", true).value());
  EXPECT_EQ(file->get_int("tokenizer.ggml.bos_token_id", -1).value(), 1);
  EXPECT_EQ(file->get_int("tokenizer.ggml.eos_token_id", -1).value(), 2);
  EXPECT_EQ(file->find("llama.context_length")->type, ValueType::UINT32);

  const std::vector<std::string> tokens = file->get_string_array("tokenizer.ggml.tokens").value();
  ASSERT_EQ(tokens.size(), 1024u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(file->get_float_array("tokenizer.ggml.scores").value().size(), 1024u);
  const std::vector<int64_t> token_types = file->get_int_array("tokenizer.ggml.token_type").value();
  ASSERT_EQ(token_types.size(), 1024u);
  EXPECT_EQ(token_types[0], 2);  // unknown
  EXPECT_EQ(token_types[1], 3);  // control
  EXPECT_EQ(token_types[2], 3);

  ASSERT_EQ(file->tensors().size(), 21u);
  EXPECT_EQ(file->tensors().front().name, "output.weight");
  EXPECT_EQ(file->tensors().back().name, "blk.1.ffn_up.weight");
  const TensorInfo* attn_v = file->tensor("blk.1.attn_v.weight");
  ASSERT_NE(attn_v, nullptr);
  EXPECT_EQ(attn_v->type, TensorType::Q6_K);
  EXPECT_EQ(attn_v->dims, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(attn_v->shape_string(), "[256, 64]");
  EXPECT_EQ(attn_v->n_elements(), 256 * 64);
  EXPECT_EQ(attn_v->rows(), 64);
  EXPECT_EQ(attn_v->n_bytes, 64u * 210u);  // one 210-byte Q6_K block per 256-value row
  EXPECT_EQ(attn_v->offset, 873472u);
  // Layer 0's attn_v is plain Q4_K: the _M mix upgrades only some tensors.
  EXPECT_EQ(file->tensor("blk.0.attn_v.weight")->type, TensorType::Q4_K);
  const TensorInfo* norm = file->tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, TensorType::F32);
  EXPECT_EQ(norm->dims, (std::vector<int64_t>{256}));
  EXPECT_EQ(norm->n_bytes, 1024u);
  EXPECT_EQ(file->tensor("no.such.tensor"), nullptr);
  EXPECT_EQ(file->find("no.such.key"), nullptr);
  // The header (tensor table included) ends at byte 23350; data starts at the next multiple of 32.
  EXPECT_EQ(file->data_offset(), 23360u);
}

TEST(GgufReader, EveryVocabularyOpensWithArraysOfTheExpectedLength) {
  struct Expected {
    std::string model;         // tokenizer.ggml.model
    size_t n_tokens;
    size_t n_merges;           // 0: SentencePiece, no merges
    int64_t eos;
  };
  const std::map<std::string, Expected> expected_by_file = {
      {"ggml-vocab-llama-spm.gguf", {"llama", 32000, 0, 2}},
      {"ggml-vocab-phi-3.gguf", {"llama", 32064, 0, 32000}},
      {"ggml-vocab-gpt-2.gguf", {"gpt2", 50257, 50000, 50256}},
      {"ggml-vocab-deepseek-coder.gguf", {"gpt2", 32256, 31757, 32014}},
      {"ggml-vocab-deepseek-llm.gguf", {"gpt2", 102400, 99757, 100001}},
  };
  const std::vector<std::filesystem::path> files = gguf_files_in("vocab");
  ASSERT_EQ(files.size(), expected_by_file.size());
  for (const std::filesystem::path& path : files) {
    SCOPED_TRACE(path.filename().string());
    ASSERT_TRUE(expected_by_file.count(path.filename().string()));
    const Expected& expected = expected_by_file.at(path.filename().string());
    std::unique_ptr<GgufFile> file = open_or_fail(path);
    ASSERT_NE(file, nullptr);
    expect_consistent_with_disk(*file, path);
    EXPECT_TRUE(file->tensors().empty());
    EXPECT_EQ(file->get_string("tokenizer.ggml.model").value(), expected.model);
    EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens").value().size(), expected.n_tokens);
    EXPECT_EQ(file->get_int_array("tokenizer.ggml.token_type").value().size(), expected.n_tokens);
    EXPECT_EQ(file->get_string_array("tokenizer.ggml.merges").value().size(), expected.n_merges);
    // SentencePiece vocabularies carry one score per token; BPE ones carry none.
    EXPECT_EQ(file->get_float_array("tokenizer.ggml.scores").value().size(),
              expected.n_merges == 0 ? expected.n_tokens : 0u);
    EXPECT_EQ(file->get_int("tokenizer.ggml.eos_token_id", -1).value(), expected.eos);
  }
}

TEST(GgufReader, VocabularyStringsSurviveByteForByte) {
  std::unique_ptr<GgufFile> gpt2 = open_or_fail(testdata("vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_NE(gpt2, nullptr);
  const std::vector<std::string> merges = gpt2->get_string_array("tokenizer.ggml.merges").value();
  ASSERT_FALSE(merges.empty());
  EXPECT_EQ(merges[0], "\xC4\xA0 t");  // "Ġ t": U+0120 is GPT-2's byte-level stand-in for a space
  const std::vector<std::string> tokens = gpt2->get_string_array("tokenizer.ggml.tokens").value();
  EXPECT_EQ(tokens[0], "!");
  EXPECT_EQ(tokens.back(), "<|endoftext|>");

  std::unique_ptr<GgufFile> phi3 = open_or_fail(testdata("vocab/ggml-vocab-phi-3.gguf"));
  ASSERT_NE(phi3, nullptr);
  const std::string chat_template = phi3->get_string("tokenizer.chat_template").value();
  EXPECT_EQ(chat_template.rfind("{{ bos_token }}", 0), 0u);
  EXPECT_NE(chat_template.find("<|assistant|>"), std::string::npos);
  EXPECT_EQ(phi3->get_float_array("tokenizer.ggml.scores").value()[0], -1000.0f);
}

TEST(GgufReader, EveryQuantReferenceFileHoldsTheTensorItsManifestDescribes) {
  std::ifstream manifest_stream(testdata("quant/manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(manifest_stream);
  const std::vector<std::filesystem::path> files = gguf_files_in("quant");
  ASSERT_EQ(files.size(), manifest.size());
  for (const nlohmann::json& entry : manifest) {
    const std::filesystem::path path = testdata("quant/" + entry["file"].get<std::string>());
    SCOPED_TRACE(path.filename().string());
    std::unique_ptr<GgufFile> file = open_or_fail(path);
    ASSERT_NE(file, nullptr);
    expect_consistent_with_disk(*file, path);
    ASSERT_EQ(file->tensors().size(), 1u);
    const TensorInfo& t = file->tensors()[0];
    EXPECT_EQ(t.name, entry["tensor"].get<std::string>());
    EXPECT_EQ(type_name(t.type), entry["type"].get<std::string>());
    const int64_t rows = entry["rows"].get<int64_t>(), cols = entry["cols"].get<int64_t>();
    EXPECT_EQ(t.dims, (std::vector<int64_t>{cols, rows}));
    EXPECT_EQ(t.n_bytes, row_bytes(t.type, cols) * rows);
    // The reference .f32 holds exactly one float per element of the tensor.
    EXPECT_EQ(std::filesystem::file_size(testdata("quant/" + entry["dequantized"].get<std::string>())),
              static_cast<uintmax_t>(t.n_elements()) * sizeof(float));
    // One key and one tensor entry: the whole header fits in the first 128 bytes.
    EXPECT_EQ(file->data_offset(), 128u);
    EXPECT_EQ(file->data_offset() + t.n_bytes, file->file_size());
  }
}

TEST(GgufReader, ParseOfTheBytesAgreesWithOpenOfTheFile) {
  const std::filesystem::path path = testdata("models/qwen3-Q8_0.gguf");
  const std::vector<uint8_t> bytes = read_bytes(path);
  std::unique_ptr<GgufFile> mapped = open_or_fail(path);
  Result<std::unique_ptr<GgufFile>> parsed = GgufFile::parse(bytes.data(), bytes.size(), "qwen3 copy");
  ASSERT_NE(mapped, nullptr);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const GgufFile& copy = *parsed.value();
  EXPECT_EQ(copy.path(), "qwen3 copy");
  EXPECT_EQ(mapped->path(), path.string());
  EXPECT_EQ(copy.data_offset(), mapped->data_offset());
  ASSERT_EQ(copy.metadata().size(), mapped->metadata().size());
  for (size_t i = 0; i < copy.metadata().size(); ++i) {
    EXPECT_EQ(copy.metadata()[i].key, mapped->metadata()[i].key);
    EXPECT_EQ(copy.metadata()[i].value.type, mapped->metadata()[i].value.type);
  }
  ASSERT_EQ(copy.tensors().size(), mapped->tensors().size());
  for (size_t i = 0; i < copy.tensors().size(); ++i) {
    const TensorInfo& a = copy.tensors()[i];
    const TensorInfo& b = mapped->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dims, b.dims);
    EXPECT_EQ(a.n_bytes, b.n_bytes);
    // The parsed file owns a copy: same bytes, different memory from both the input and the mapping.
    EXPECT_NE(a.data, b.data);
    EXPECT_NE(a.data, bytes.data() + copy.data_offset() + a.offset);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0);
  }
}

// Read into memory of its own, a file shows the same bytes as mapped, from
// a huge-page boundary; the errors for files that are not GGUF are the same.
TEST(GgufReader, ACopiedFileIsTheFileFromAHugePageBoundary) {
  for (const auto& path : gguf_files_in("models")) {
    Result<std::unique_ptr<GgufFile>> copied = GgufFile::open(path.string(), Placement::kCopy);
    ASSERT_TRUE(copied.ok()) << copied.status().message();
    const GgufFile& file = **copied;
    EXPECT_EQ(file.placement(), Placement::kCopy);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(file.bytes().data()) % (2u << 20), 0u) << path;
    expect_consistent_with_disk(file, path);
    const auto mapped = open_or_fail(path);
    ASSERT_TRUE(mapped);
    EXPECT_EQ(mapped->placement(), Placement::kMap);
    ASSERT_EQ(mapped->tensors().size(), file.tensors().size());
  }
  TempDir dir;
  std::ofstream(dir.file("empty.gguf")).close();
  Result<std::unique_ptr<GgufFile>> empty = GgufFile::open(dir.file("empty.gguf"), Placement::kCopy);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("magic"), std::string::npos) << empty.status().message();
  Result<std::unique_ptr<GgufFile>> missing = GgufFile::open(dir.file("absent.gguf"), Placement::kCopy);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);
}

TEST(GgufReader, OpenReportsPathsThatAreNotGgufFiles) {
  TempDir dir;
  Result<std::unique_ptr<GgufFile>> missing = GgufFile::open(dir.file("absent.gguf"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir.file("absent.gguf")), std::string::npos);
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos);

  Result<std::unique_ptr<GgufFile>> directory = GgufFile::open(dir.path().string());
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.status().message().find("not a regular file"), std::string::npos);

  // An empty file cannot be mapped; it must still give a clean error about the magic.
  std::ofstream(dir.file("empty.gguf")).close();
  Result<std::unique_ptr<GgufFile>> empty = GgufFile::open(dir.file("empty.gguf"));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find(dir.file("empty.gguf")), std::string::npos);
  EXPECT_NE(empty.status().message().find("magic"), std::string::npos);

  // A text file: the error names the path and the magic.
  std::ofstream(dir.file("notes.gguf")) << "these are not tensors\n";
  Result<std::unique_ptr<GgufFile>> text = GgufFile::open(dir.file("notes.gguf"));
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message().rfind(dir.file("notes.gguf") + ": magic", 0), 0u)
      << text.status().message();
}

TEST(GgufReader, MissingKeysGiveTheFallback) {
  std::unique_ptr<GgufFile> file = open_or_fail(testdata("quant/Q8_0.gguf"));
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->get_string("missing", "fallback").value(), "fallback");
  EXPECT_EQ(file->get_int("missing", -7).value(), -7);
  EXPECT_EQ(file->get_float("missing", 2.5).value(), 2.5);
  EXPECT_TRUE(file->get_bool("missing", true).value());
  EXPECT_TRUE(file->get_string_array("missing").value().empty());
  EXPECT_TRUE(file->get_float_array("missing").value().empty());
  EXPECT_TRUE(file->get_int_array("missing").value().empty());
}

}  // namespace
}  // namespace revis::gguf
