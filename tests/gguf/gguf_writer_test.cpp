// Tests for gguf/gguf_writer.h: every value type and tensor layout survives a
// write + read round trip exactly; the writer reproduces llama.cpp-written
// files byte for byte; alignment is honoured; files appear atomically
// (tmp + rename); and invalid requests are refused instead of producing a
// file the reader would reject.
#include "gguf/gguf_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "support/testdata.h"

namespace revis::gguf {
namespace {

using revis::testing::read_bytes;
using revis::testing::TempDir;
using revis::testing::testdata;

// Values built the way the reader stores them: unsigned integers as uint64,
// signed as int64, both float widths as double.
Value unsigned_value(ValueType type, uint64_t v) { return Value{type, v}; }
Value signed_value(ValueType type, int64_t v) { return Value{type, v}; }
Value float_value(ValueType type, double v) { return Value{type, v}; }
Value bool_value(bool v) { return Value{ValueType::BOOL, v}; }
Value string_value(std::string v) { return Value{ValueType::STRING, std::move(v)}; }
Value array_value(ValueType element_type, std::vector<Value> items) {
  return Value{ValueType::ARRAY, Array{element_type, std::move(items)}};
}

// Exact comparison, recursing into arrays. Doubles compare bit for bit so
// that -0.0, NaN payloads and denormals are checked too.
void expect_same_value(const Value& expected, const Value& actual, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_EQ(value_type_name(actual.type), std::string(value_type_name(expected.type)));
  ASSERT_EQ(actual.data.index(), expected.data.index());
  if (const Array* want = expected.as_array()) {
    const Array* got = actual.as_array();
    ASSERT_EQ(value_type_name(got->element_type), std::string(value_type_name(want->element_type)));
    ASSERT_EQ(got->items.size(), want->items.size());
    for (size_t i = 0; i < want->items.size(); ++i)
      expect_same_value(want->items[i], got->items[i], where + "[" + std::to_string(i) + "]");
  } else if (const double* want_double = std::get_if<double>(&expected.data)) {
    const double got_double = std::get<double>(actual.data);
    EXPECT_EQ(std::memcmp(want_double, &got_double, sizeof(double)), 0) << *want_double << " vs " << got_double;
  } else if (const std::string* want_string = expected.as_string()) {
    EXPECT_EQ(*actual.as_string(), *want_string);
  } else if (const bool* want_bool = std::get_if<bool>(&expected.data)) {
    EXPECT_EQ(std::get<bool>(actual.data), *want_bool);
  } else if (const uint64_t* want_unsigned = std::get_if<uint64_t>(&expected.data)) {
    EXPECT_EQ(std::get<uint64_t>(actual.data), *want_unsigned);
  } else {
    EXPECT_EQ(std::get<int64_t>(actual.data), std::get<int64_t>(expected.data));
  }
}

void expect_same_metadata(const std::vector<KeyValue>& expected, const std::vector<KeyValue>& actual) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].key, expected[i].key) << "entry " << i << ": insertion order must be kept";
    expect_same_value(expected[i].value, actual[i].value, expected[i].key);
  }
}

std::unique_ptr<GgufFile> open_or_fail(const std::string& path) {
  Result<std::unique_ptr<GgufFile>> result = GgufFile::open(path);
  EXPECT_TRUE(result.ok()) << result.status().message();
  if (!result.ok()) return nullptr;
  return std::move(*result);
}

std::vector<uint8_t> pseudo_random_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> bytes(n);
  uint32_t state = seed * 2654435761u + 1;
  for (uint8_t& b : bytes) {
    state = state * 1664525u + 1013904223u;  // LCG: cheap, deterministic, every byte value appears
    b = static_cast<uint8_t>(state >> 24);
  }
  return bytes;
}

std::set<std::string> directory_listing(const std::filesystem::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

TEST(GgufWriter, EveryValueTypeRoundTripsExactly) {
  const float f32_pi = 3.14159274f;
  std::vector<KeyValue> expected = {
      {"u8.max", unsigned_value(ValueType::UINT8, 255)},
      {"u8.zero", unsigned_value(ValueType::UINT8, 0)},
      {"i8.min", signed_value(ValueType::INT8, -128)},
      {"i8.max", signed_value(ValueType::INT8, 127)},
      {"u16.max", unsigned_value(ValueType::UINT16, 65535)},
      {"i16.min", signed_value(ValueType::INT16, -32768)},
      {"u32.max", unsigned_value(ValueType::UINT32, std::numeric_limits<uint32_t>::max())},
      {"i32.min", signed_value(ValueType::INT32, std::numeric_limits<int32_t>::min())},
      {"i32.max", signed_value(ValueType::INT32, std::numeric_limits<int32_t>::max())},
      {"u64.max", unsigned_value(ValueType::UINT64, std::numeric_limits<uint64_t>::max())},
      {"u64.high_bit", unsigned_value(ValueType::UINT64, 0x8000000000000001ull)},
      {"i64.min", signed_value(ValueType::INT64, std::numeric_limits<int64_t>::min())},
      {"i64.max", signed_value(ValueType::INT64, std::numeric_limits<int64_t>::max())},
      // f32 values must be representable as float to survive the narrowing write.
      {"f32.pi", float_value(ValueType::FLOAT32, static_cast<double>(f32_pi))},
      {"f32.neg_zero", float_value(ValueType::FLOAT32, -0.0)},
      {"f32.denorm", float_value(ValueType::FLOAT32, std::numeric_limits<float>::denorm_min())},
      {"f32.inf", float_value(ValueType::FLOAT32, -std::numeric_limits<double>::infinity())},
      {"f64.tenth", float_value(ValueType::FLOAT64, 0.1)},
      {"f64.max", float_value(ValueType::FLOAT64, std::numeric_limits<double>::max())},
      {"f64.denorm", float_value(ValueType::FLOAT64, std::numeric_limits<double>::denorm_min())},
      {"f64.nan", float_value(ValueType::FLOAT64, std::numeric_limits<double>::quiet_NaN())},
      {"bool.true", bool_value(true)},
      {"bool.false", bool_value(false)},
      {"string.empty", string_value("")},
      {"string.ascii", string_value("llama")},
      {"string.non_ascii", string_value("h\xC3\xA9llo \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\xA6\x99")},
      {"string.embedded_nul", string_value(std::string("a\0b", 3))},
      {"string.long", string_value(std::string(100000, 'x'))},
      {"", string_value("a key may be empty too")},
  };
  std::vector<KeyValue> arrays = {
      {"array.u8", array_value(ValueType::UINT8, {unsigned_value(ValueType::UINT8, 0),
                                                  unsigned_value(ValueType::UINT8, 255)})},
      {"array.i8", array_value(ValueType::INT8, {signed_value(ValueType::INT8, -128),
                                                 signed_value(ValueType::INT8, 127)})},
      {"array.u16", array_value(ValueType::UINT16, {unsigned_value(ValueType::UINT16, 65535)})},
      {"array.i16", array_value(ValueType::INT16, {signed_value(ValueType::INT16, -1),
                                                   signed_value(ValueType::INT16, 300)})},
      {"array.u32", array_value(ValueType::UINT32, {unsigned_value(ValueType::UINT32, 4000000000u)})},
      {"array.i32", array_value(ValueType::INT32, {signed_value(ValueType::INT32, -2000000000),
                                                   signed_value(ValueType::INT32, 7)})},
      {"array.u64", array_value(ValueType::UINT64, {unsigned_value(ValueType::UINT64, ~0ull)})},
      {"array.i64", array_value(ValueType::INT64, {signed_value(ValueType::INT64, -(1ll << 60))})},
      {"array.f32", array_value(ValueType::FLOAT32, {float_value(ValueType::FLOAT32, 0.5),
                                                     float_value(ValueType::FLOAT32, -1000.0)})},
      {"array.f64", array_value(ValueType::FLOAT64, {float_value(ValueType::FLOAT64, 1e-300),
                                                     float_value(ValueType::FLOAT64, 1e300)})},
      {"array.bool", array_value(ValueType::BOOL, {bool_value(true), bool_value(false), bool_value(true)})},
      {"array.string", array_value(ValueType::STRING, {string_value(""), string_value("\xC4\xA0 t"),
                                                       string_value("<|endoftext|>")})},
      {"array.empty_u8", array_value(ValueType::UINT8, {})},
      {"array.empty_string", array_value(ValueType::STRING, {})},
      {"array.empty_f64", array_value(ValueType::FLOAT64, {})},
      {"array.empty_array", array_value(ValueType::ARRAY, {})},
      // Arrays of arrays: each inner array carries its own element type.
      {"array.of_arrays",
       array_value(ValueType::ARRAY, {array_value(ValueType::UINT8, {unsigned_value(ValueType::UINT8, 1),
                                                                     unsigned_value(ValueType::UINT8, 2)}),
                                      array_value(ValueType::STRING, {string_value("inner")}),
                                      array_value(ValueType::FLOAT32, {})})},
      {"array.three_deep",
       array_value(ValueType::ARRAY,
                   {array_value(ValueType::ARRAY, {array_value(ValueType::INT32, {signed_value(ValueType::INT32, 7)}),
                                                   array_value(ValueType::BOOL, {})})})},
  };
  expected.insert(expected.end(), arrays.begin(), arrays.end());

  GgufWriter writer;
  for (const KeyValue& kv : expected) writer.set(kv.key, kv.value);
  TempDir dir;
  const std::string path = dir.file("values.gguf");
  ASSERT_TRUE(writer.write(path).ok());
  std::unique_ptr<GgufFile> file = open_or_fail(path);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->version(), 3u);
  EXPECT_TRUE(file->tensors().empty());
  expect_same_metadata(expected, file->metadata());
}

TEST(GgufWriter, TypedSettersProduceTheTypesTheGettersExpect) {
  GgufWriter writer;
  writer.set_u32("n_ctx", 4096);
  writer.set_i32("offset", -5);
  writer.set_f32("eps", 1e-6f);
  writer.set_bool("add_bos", true);
  writer.set_string("name", "t\xC3\xBCrkish");
  writer.set_string_array("tokens", {"<s>", "", "\xE2\x96\x81the"});
  writer.set_f32_array("scores", {0.0f, -1.5f, 3.25f});
  writer.set_i32_array("types", {1, -2, 2147483647});
  TempDir dir;
  ASSERT_TRUE(writer.write(dir.file("typed.gguf")).ok());
  std::unique_ptr<GgufFile> file = open_or_fail(dir.file("typed.gguf"));
  ASSERT_NE(file, nullptr);

  EXPECT_EQ(file->find("n_ctx")->type, ValueType::UINT32);
  EXPECT_EQ(file->find("offset")->type, ValueType::INT32);
  EXPECT_EQ(file->find("eps")->type, ValueType::FLOAT32);
  EXPECT_EQ(file->find("add_bos")->type, ValueType::BOOL);
  EXPECT_EQ(file->find("name")->type, ValueType::STRING);
  EXPECT_EQ(file->find("tokens")->as_array()->element_type, ValueType::STRING);
  EXPECT_EQ(file->find("scores")->as_array()->element_type, ValueType::FLOAT32);
  EXPECT_EQ(file->find("types")->as_array()->element_type, ValueType::INT32);

  EXPECT_EQ(file->get_int("n_ctx", 0).value(), 4096);
  EXPECT_EQ(file->get_int("offset", 0).value(), -5);
  EXPECT_EQ(file->get_float("eps", 0).value(), static_cast<double>(1e-6f));
  EXPECT_TRUE(file->get_bool("add_bos", false).value());
  EXPECT_EQ(file->get_string("name").value(), "t\xC3\xBCrkish");
  EXPECT_EQ(file->get_string_array("tokens").value(), (std::vector<std::string>{"<s>", "", "\xE2\x96\x81the"}));
  EXPECT_EQ(file->get_float_array("scores").value(), (std::vector<float>{0.0f, -1.5f, 3.25f}));
  EXPECT_EQ(file->get_int_array("types").value(), (std::vector<int64_t>{1, -2, 2147483647}));
}

TEST(GgufWriter, SetReplacesAnExistingKeyInPlace) {
  GgufWriter writer;
  writer.set_u32("first", 1);
  writer.set_string("second", "b");
  writer.set_string("first", "replaced");  // a new type, same position
  TempDir dir;
  ASSERT_TRUE(writer.write(dir.file("replace.gguf")).ok());
  std::unique_ptr<GgufFile> file = open_or_fail(dir.file("replace.gguf"));
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(file->metadata().size(), 2u);
  EXPECT_EQ(file->metadata()[0].key, "first");
  EXPECT_EQ(file->get_string("first").value(), "replaced");
  EXPECT_EQ(file->metadata()[1].key, "second");
}

struct TensorSpec {
  std::string name;
  TensorType type;
  std::vector<int64_t> dims;
};

// Sizes chosen so that most tensors end off the alignment grid and need padding.
const std::vector<TensorSpec> kMixedTensors = {
    {"f32.odd", TensorType::F32, {3, 2}},          // 24 bytes
    {"f16.vector", TensorType::F16, {5}},          // 10 bytes
    {"q8_0.matrix", TensorType::Q8_0, {64, 3}},    // 204 bytes
    {"q4_k.matrix", TensorType::Q4_K, {256, 2}},   // 288 bytes
    {"q6_k.3d", TensorType::Q6_K, {256, 1, 2}},    // 420 bytes
    {"bf16.4d", TensorType::BF16, {2, 3, 4, 5}},   // 240 bytes
    {"iq4_xs.row", TensorType::IQ4_XS, {256}},     // 136 bytes
};

int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Writes kMixedTensors (with seeded random contents) and checks every tensor
// reads back at an aligned offset with identical bytes and zero padding.
void check_tensor_round_trip(uint64_t alignment, const std::vector<uint64_t>& expected_offsets) {
  SCOPED_TRACE("alignment " + std::to_string(alignment));
  GgufWriter writer;
  writer.set_string("general.architecture", "test");
  if (alignment != 32) writer.set_u32("general.alignment", static_cast<uint32_t>(alignment));
  std::vector<std::vector<uint8_t>> contents;
  for (size_t i = 0; i < kMixedTensors.size(); ++i) {
    const TensorSpec& spec = kMixedTensors[i];
    contents.push_back(pseudo_random_bytes(row_bytes(spec.type, element_count(spec.dims)), static_cast<uint32_t>(i)));
    Status added = writer.add_tensor(spec.name, spec.type, spec.dims, contents.back().data(), contents.back().size());
    ASSERT_TRUE(added.ok()) << added.message();
  }
  TempDir dir;
  const std::string path = dir.file("tensors.gguf");
  ASSERT_TRUE(writer.write(path).ok());
  std::unique_ptr<GgufFile> file = open_or_fail(path);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->alignment(), alignment);
  EXPECT_EQ(file->data_offset() % alignment, 0u);
  ASSERT_EQ(file->tensors().size(), kMixedTensors.size());

  const std::vector<uint8_t> disk = read_bytes(path);
  for (size_t i = 0; i < kMixedTensors.size(); ++i) {
    const TensorSpec& spec = kMixedTensors[i];
    const TensorInfo& t = file->tensors()[i];
    SCOPED_TRACE(spec.name);
    EXPECT_EQ(t.name, spec.name);
    EXPECT_EQ(t.type, spec.type);
    EXPECT_EQ(t.dims, spec.dims);
    EXPECT_EQ(t.offset, expected_offsets[i]);
    ASSERT_EQ(t.n_bytes, contents[i].size());
    EXPECT_EQ(std::memcmp(t.data, contents[i].data(), t.n_bytes), 0);
    // The padding after each tensor, up to the next aligned offset, is zeros.
    const uint64_t start = file->data_offset() + t.offset;
    const uint64_t padded_end = (start + t.n_bytes + alignment - 1) / alignment * alignment;
    ASSERT_LE(padded_end, disk.size());
    for (uint64_t at = start + t.n_bytes; at < padded_end; ++at) ASSERT_EQ(disk[at], 0) << "padding byte " << at;
    if (i + 1 == kMixedTensors.size()) {
      EXPECT_EQ(padded_end, disk.size()) << "the file ends after the last padding";
    }
  }
}

TEST(GgufWriter, TensorsOfSeveralTypesRoundTripWithDefaultAlignment) {
  check_tensor_round_trip(32, {0, 32, 64, 288, 576, 1024, 1280});
}

TEST(GgufWriter, GeneralAlignment64IsHonoured) {
  check_tensor_round_trip(64, {0, 64, 128, 384, 704, 1152, 1408});
}

TEST(GgufWriter, RewritesLlamaCppFilesByteForByte) {
  // The shipped files were written by llama.cpp's gguf-py. Copying their
  // metadata and tensors through GgufWriter must reproduce them exactly:
  // same header encoding, same offsets, same padding.
  std::vector<std::filesystem::path> sources = {testdata("models/llama-spm-Q4_K_M.gguf"),
                                                testdata("models/qwen3moe-Q8_0.gguf"),
                                                testdata("models/llama-bpe-F16.gguf"),
                                                testdata("quant/IQ4_XS.gguf")};
  TempDir dir;
  for (const std::filesystem::path& source : sources) {
    SCOPED_TRACE(source.filename().string());
    std::unique_ptr<GgufFile> original = open_or_fail(source.string());
    ASSERT_NE(original, nullptr);
    GgufWriter writer;
    writer.copy_metadata(*original);
    for (const TensorInfo& t : original->tensors())
      ASSERT_TRUE(writer.add_tensor(t.name, t.type, t.dims, t.data, t.n_bytes).ok());
    const std::string copy = dir.file(source.filename().string());
    ASSERT_TRUE(writer.write(copy).ok());
    const std::vector<uint8_t> want = read_bytes(source), got = read_bytes(copy);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want);
    std::unique_ptr<GgufFile> reread = open_or_fail(copy);
    ASSERT_NE(reread, nullptr);
    expect_same_metadata(original->metadata(), reread->metadata());
  }
}

TEST(GgufWriter, RewritesATensorlessVocabularyWithOnlyTrailingPadding) {
  // llama.cpp's vocabulary files end right after the metadata; GgufWriter
  // always pads the header to the alignment. Apart from that padding the
  // bytes must be identical.
  const std::filesystem::path source = testdata("vocab/ggml-vocab-phi-3.gguf");
  std::unique_ptr<GgufFile> original = open_or_fail(source.string());
  ASSERT_NE(original, nullptr);
  GgufWriter writer;
  writer.copy_metadata(*original);
  TempDir dir;
  ASSERT_TRUE(writer.write(dir.file("vocab.gguf")).ok());
  std::vector<uint8_t> want = read_bytes(source);
  want.resize((want.size() + 31) / 32 * 32, 0);
  EXPECT_TRUE(read_bytes(dir.file("vocab.gguf")) == want);
}

TEST(GgufWriter, WritesThroughATemporaryFileAndRename) {
  TempDir dir;
  const std::string path = dir.file("model.gguf");
  const std::vector<uint8_t> old_bytes = pseudo_random_bytes(256 * 4, 1);
  GgufWriter first;
  ASSERT_TRUE(first.add_tensor("w", TensorType::F32, {256}, old_bytes.data(), old_bytes.size()).ok());
  ASSERT_TRUE(first.write(path).ok());
  EXPECT_EQ(directory_listing(dir.path()), std::set<std::string>{"model.gguf"}) << "no .tmp may remain";

  // Keep the old file mapped while a new one is written to the same path.
  std::unique_ptr<GgufFile> old_file = open_or_fail(path);
  ASSERT_NE(old_file, nullptr);
  struct stat old_stat {};
  ASSERT_EQ(::stat(path.c_str(), &old_stat), 0);

  const std::vector<uint8_t> new_bytes = pseudo_random_bytes(512 * 4, 2);
  GgufWriter second;
  second.set_string("general.name", "second");
  ASSERT_TRUE(second.add_tensor("w", TensorType::F32, {512}, new_bytes.data(), new_bytes.size()).ok());
  ASSERT_TRUE(second.write(path).ok());
  EXPECT_EQ(directory_listing(dir.path()), std::set<std::string>{"model.gguf"});

  // A rename gives the path a new inode; writing in place would have kept it
  // and changed (or, on truncation, faulted) the reader's mapping.
  struct stat new_stat {};
  ASSERT_EQ(::stat(path.c_str(), &new_stat), 0);
  EXPECT_NE(new_stat.st_ino, old_stat.st_ino);
  EXPECT_EQ(std::memcmp(old_file->tensors()[0].data, old_bytes.data(), old_bytes.size()), 0);
  std::unique_ptr<GgufFile> new_file = open_or_fail(path);
  ASSERT_NE(new_file, nullptr);
  EXPECT_EQ(new_file->get_string("general.name").value(), "second");
  ASSERT_EQ(new_file->tensors()[0].n_bytes, new_bytes.size());
  EXPECT_EQ(std::memcmp(new_file->tensors()[0].data, new_bytes.data(), new_bytes.size()), 0);
}

TEST(GgufWriter, FailedWritesLeaveNothingBehind) {
  TempDir dir;
  GgufWriter writer;
  writer.set_string("general.name", "x");

  // The temporary file cannot even be created.
  const std::string in_missing_dir = dir.file("missing/model.gguf");
  Status no_dir = writer.write(in_missing_dir);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.message().find(in_missing_dir + ".tmp"), std::string::npos) << no_dir.message();

  // The temporary file is written but cannot replace a non-empty directory.
  const std::string blocked = dir.file("blocked.gguf");
  std::filesystem::create_directory(blocked);
  std::ofstream(blocked + "/keep") << "x";
  Status rename_failed = writer.write(blocked);
  ASSERT_FALSE(rename_failed.ok());
  EXPECT_NE(rename_failed.message().find(blocked), std::string::npos) << rename_failed.message();
  EXPECT_EQ(directory_listing(dir.path()), std::set<std::string>{"blocked.gguf"});
}

// A produced tensor arrives in pieces during write() and reads back as if
// it had been copied in; a producer that fails, or hands over the wrong
// number of bytes, fails the write and leaves no file.
TEST(GgufWriter, ProducedTensorsStreamInPiecesAndAreChecked) {
  TempDir dir;
  std::vector<uint8_t> bytes(256 * 4);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  int calls = 0;
  auto in_pieces = [&](size_t piece) {
    return [&bytes, &calls, piece](const GgufWriter::Sink& sink) -> Status {
      ++calls;
      for (size_t at = 0; at < bytes.size(); at += piece)
        if (Status s = sink(&bytes[at], std::min(piece, bytes.size() - at)); !s.ok()) return s;
      return {};
    };
  };
  GgufWriter writer;
  ASSERT_TRUE(writer.add_tensor_producer("streamed", TensorType::F32, {256}, bytes.size(), in_pieces(100)).ok());
  ASSERT_TRUE(writer.add_tensor("copied", TensorType::F32, {256}, bytes.data(), bytes.size()).ok());
  EXPECT_EQ(calls, 0);  // nothing is produced before write()
  ASSERT_TRUE(writer.write(dir.file("ok.gguf")).ok());
  EXPECT_EQ(calls, 1);
  auto file = GgufFile::open(dir.file("ok.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (const char* name : {"streamed", "copied"}) {
    const TensorInfo* t = (*file)->tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->n_bytes), bytes) << name;
  }

  auto expect_failure = [&](GgufWriter::Producer produce, const std::string& expected) {
    GgufWriter w;
    ASSERT_TRUE(w.add_tensor_producer("t", TensorType::F32, {256}, bytes.size(), std::move(produce)).ok());
    Status s = w.write(dir.file("bad.gguf"));
    ASSERT_FALSE(s.ok()) << expected;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
    EXPECT_EQ(directory_listing(dir.path()), std::set<std::string>{"ok.gguf"});
  };
  expect_failure([&](const GgufWriter::Sink& sink) { return sink(bytes.data(), bytes.size() - 4); },
                 "1020 bytes produced, expected 1024");
  expect_failure(
      [&](const GgufWriter::Sink& sink) {
        if (Status s = sink(bytes.data(), bytes.size()); !s.ok()) return s;
        return sink(bytes.data(), 1);
      },
      "more bytes than its type and shape hold");
  expect_failure([](const GgufWriter::Sink&) { return Status::error("source went away"); }, "source went away");
}

TEST(GgufWriter, RefusesAnAlignmentTheReaderWouldReject) {
  // Alignment 0 used to divide by zero; 3 or a string produced a file no reader accepts.
  const std::vector<Value> bad_alignments = {unsigned_value(ValueType::UINT32, 0),
                                             unsigned_value(ValueType::UINT32, 3),
                                             signed_value(ValueType::INT32, -32),
                                             unsigned_value(ValueType::UINT64, 1ull << 62),
                                             string_value("32")};
  TempDir dir;
  for (const Value& alignment : bad_alignments) {
    GgufWriter writer;
    writer.set("general.alignment", alignment);
    const std::vector<uint8_t> data(4 * 32);
    ASSERT_TRUE(writer.add_tensor("w", TensorType::F32, {32}, data.data(), data.size()).ok());
    Status status = writer.write(dir.file("aligned.gguf"));
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("general.alignment"), std::string::npos) << status.message();
    EXPECT_TRUE(directory_listing(dir.path()).empty());
  }
}

TEST(GgufWriter, AddTensorRefusesShapesAndSizesTheReaderWouldReject) {
  GgufWriter writer;
  const std::vector<uint8_t> data(1 << 16);
  auto add = [&](std::vector<int64_t> dims, TensorType type, size_t n_bytes) {
    return writer.add_tensor("bad.tensor", type, std::move(dims), data.data(), n_bytes);
  };
  auto expect_refused = [](const Status& status, const std::string& fragment) {
    ASSERT_FALSE(status.ok()) << "expected an error mentioning " << fragment;
    EXPECT_NE(status.message().find("bad.tensor"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
  };
  expect_refused(add({32, 2}, TensorType::F32, 32 * 2 * 4 - 1), "255 bytes given, expected 256");
  expect_refused(add({33}, TensorType::Q8_0, 34), "row length");
  expect_refused(add({}, TensorType::F32, 4), "dimensions");
  expect_refused(add({1, 1, 1, 1, 1}, TensorType::F32, 4), "dimensions");
  expect_refused(add({0}, TensorType::F32, 0), "dimension 0");
  expect_refused(add({4, -2}, TensorType::F32, 32), "dimension 1");
  // 2^32 * 2^32 elements would overflow the element count.
  expect_refused(add({int64_t{1} << 32, int64_t{1} << 32}, TensorType::F32, 4), "dimension 1");
  expect_refused(writer.add_tensor("bad.tensor", static_cast<TensorType>(4), {32}, data.data(), 32),
                 "tensor type id 4");

  // None of the refused tensors was kept: the file written holds only this one.
  ASSERT_TRUE(add({8}, TensorType::F32, 32).ok());
  expect_refused(add({8}, TensorType::F32, 32), "appears twice");
  TempDir dir;
  ASSERT_TRUE(writer.write(dir.file("one.gguf")).ok());
  std::unique_ptr<GgufFile> file = open_or_fail(dir.file("one.gguf"));
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(file->tensors().size(), 1u);
  EXPECT_EQ(file->tensors()[0].dims, (std::vector<int64_t>{8}));
}

TEST(GgufWriter, CopyMetadataCarriesEveryEntryOfARealVocabulary) {
  std::unique_ptr<GgufFile> vocab = open_or_fail(testdata("vocab/ggml-vocab-deepseek-coder.gguf").string());
  ASSERT_NE(vocab, nullptr);
  GgufWriter writer;
  writer.copy_metadata(*vocab);
  writer.set_string("general.name", "renamed");  // replaces in place, keeps position
  TempDir dir;
  ASSERT_TRUE(writer.write(dir.file("copy.gguf")).ok());
  std::unique_ptr<GgufFile> copy = open_or_fail(dir.file("copy.gguf"));
  ASSERT_NE(copy, nullptr);
  std::vector<KeyValue> expected = vocab->metadata();
  for (KeyValue& kv : expected)
    if (kv.key == "general.name") kv.value = string_value("renamed");
  expect_same_metadata(expected, copy->metadata());
}

}  // namespace
}  // namespace revis::gguf
