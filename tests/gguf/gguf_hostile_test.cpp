// Hostile GGUF images: every malformed header, count, length, type, shape,
// offset and alignment must come back as an error Status that names the
// offending field, without crashing, recursing without bound or allocating
// memory in proportion to a claimed (rather than present) size. The images
// are spelled out with GgufBytes so that they do not depend on the writer.
// Also: typed getters on values of the wrong type.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf_bytes.h"
#include "support/testdata.h"

// Replacing the global allocation functions lets the tests assert that no
// single allocation made while parsing a tiny hostile file is large: a
// reader that trusted a claimed count would ask for gigabytes here.
namespace {
std::atomic<bool> g_watching_allocations{false};
std::atomic<size_t> g_largest_allocation{0};
}  // namespace

// GCC cannot tell that these replacements pair malloc with free and warns.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  if (g_watching_allocations.load(std::memory_order_relaxed)) {
    size_t largest = g_largest_allocation.load(std::memory_order_relaxed);
    while (size > largest && !g_largest_allocation.compare_exchange_weak(largest, size)) {
    }
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace revis::gguf {
namespace {

using revis::gguf::testing::GgufBytes;
using revis::testing::read_bytes;
using revis::testing::TempDir;
using revis::testing::testdata;

constexpr uint64_t kHuge = uint64_t{1} << 62;
constexpr uint64_t kAllOnes = std::numeric_limits<uint64_t>::max();
// Far more than any honest parse of these few-hundred-byte images needs,
// far less than what trusting a hostile count would request.
constexpr size_t kAllocationLimit = size_t{1} << 20;

// Records the largest single allocation made while it is alive.
class AllocationWatch {
 public:
  AllocationWatch() {
    g_largest_allocation = 0;
    g_watching_allocations = true;
  }
  ~AllocationWatch() { g_watching_allocations = false; }
  size_t largest() const { return g_largest_allocation; }
};

Result<std::unique_ptr<GgufFile>> parse(const uint8_t* data, size_t size) {
  return GgufFile::parse(data, size, "hostile.gguf");
}

// Parses `bytes` and succeeds when the reader refuses them with a message
// that starts with the image name and contains every fragment, and when it
// allocated nothing large on the way.
::testing::AssertionResult rejected_mentioning(const uint8_t* data, size_t size,
                                               const std::vector<std::string>& fragments) {
  AllocationWatch watch;
  Result<std::unique_ptr<GgufFile>> result = parse(data, size);
  const size_t largest = watch.largest();
  if (result.ok()) return ::testing::AssertionFailure() << "the image parsed without error";
  const std::string& message = result.status().message();
  if (message.rfind("hostile.gguf: ", 0) != 0)
    return ::testing::AssertionFailure() << "message does not start with the image name: " << message;
  for (const std::string& fragment : fragments)
    if (message.find(fragment) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks \"" << fragment << "\": " << message;
  if (largest > kAllocationLimit)
    return ::testing::AssertionFailure() << "allocated " << largest << " bytes at once; message: " << message;
  return ::testing::AssertionSuccess() << message;
}
::testing::AssertionResult rejected_mentioning(const GgufBytes& bytes, const std::vector<std::string>& fragments) {
  return rejected_mentioning(bytes.data(), bytes.size(), fragments);
}

// Metadata only: a header announcing one entry, then its key and type; the
// caller appends the value.
GgufBytes one_entry(std::string_view key, uint32_t raw_type) {
  GgufBytes b;
  b.header(0, 1).key(key, raw_type);
  return b;
}
GgufBytes one_entry(std::string_view key, ValueType type) { return one_entry(key, static_cast<uint32_t>(type)); }

// A file with one tensor named "t" and `data_bytes` bytes of data after the
// 32-byte-aligned header.
GgufBytes one_tensor(std::initializer_list<uint64_t> dims, uint32_t raw_type, uint64_t offset, size_t data_bytes) {
  GgufBytes b;
  b.header(1, 0).tensor_info("t", dims, raw_type, offset).pad_to(32).zeros(data_bytes);
  return b;
}
GgufBytes one_tensor(std::initializer_list<uint64_t> dims, TensorType type, uint64_t offset, size_t data_bytes) {
  return one_tensor(dims, static_cast<uint32_t>(type), offset, data_bytes);
}

// A small but complete image: five metadata entries of different kinds and
// two tensors, the last of which ends exactly at the end of the file, so
// that every proper prefix of it is missing something.
GgufBytes small_valid_file() {
  GgufBytes b;
  b.header(2, 5);
  b.key("general.architecture", ValueType::STRING).str("llama");
  b.key("general.alignment", ValueType::UINT32).u32(32);
  b.key("test.flag", ValueType::BOOL).u8(1);
  b.key("test.words", ValueType::ARRAY).array_header(ValueType::STRING, 2).str("a").str("bc");
  b.key("test.scale", ValueType::FLOAT32).f32(0.5f);
  b.tensor_info("w", {32, 2}, TensorType::Q8_0, 0);  // 2 rows of one 34-byte block
  b.tensor_info("b", {4}, TensorType::F32, 96);      // 68 bytes of w, padded to 96
  b.pad_to(32);
  for (int i = 0; i < 68; ++i) b.u8(static_cast<uint8_t>(i + 1));
  b.zeros(96 - 68);
  for (float f : {1.0f, 2.0f, 3.0f, 4.0f}) b.f32(f);
  return b;
}

TEST(GgufHostile, TheSmallValidFileParses) {
  // The hostile variants below are only meaningful if the unmodified image is accepted.
  const GgufBytes bytes = small_valid_file();
  Result<std::unique_ptr<GgufFile>> result = parse(bytes.data(), bytes.size());
  ASSERT_TRUE(result.ok()) << result.status().message();
  const GgufFile& file = *result.value();
  EXPECT_EQ(file.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(file.get_string_array("test.words").value(), (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(file.get_bool("test.flag", false).value());
  EXPECT_EQ(file.get_float("test.scale", 0).value(), 0.5);
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].n_bytes, 68u);
  EXPECT_EQ(file.tensors()[0].data[0], 1);
  EXPECT_EQ(file.tensors()[0].data[67], 68);
  EXPECT_EQ(file.data_offset() + 96 + 16, bytes.size());
  EXPECT_EQ(reinterpret_cast<const float*>(file.tensors()[1].data)[3], 4.0f);
}

TEST(GgufHostile, BadMagic) {
  GgufBytes b = small_valid_file();
  b.patch<uint8_t>(3, 'G');  // "GGUG"
  EXPECT_TRUE(rejected_mentioning(b, {"magic", "GGUF"}));
  GgufBytes reversed;
  reversed.raw("FUGG").u32(3).u64(0).u64(0);
  EXPECT_TRUE(rejected_mentioning(reversed, {"magic"}));
}

TEST(GgufHostile, UnsupportedVersions) {
  for (uint32_t version : {0u, 1u, 4u, 0xFFFFFFFFu}) {
    GgufBytes b = small_valid_file();
    b.patch<uint32_t>(4, version);
    EXPECT_TRUE(rejected_mentioning(b, {"version", std::to_string(version), "expected 2 or 3"}));
  }
  // Version 2 has the same layout as 3 and is accepted.
  GgufBytes v2 = small_valid_file();
  v2.patch<uint32_t>(4, 2);
  EXPECT_TRUE(parse(v2.data(), v2.size()).ok());
}

// Every error a truncated image can produce says that something is missing.
bool says_something_is_missing(const std::string& message) {
  for (const char* phrase : {"truncated", "cannot fit", "exceeds", "beyond the end", "past the end"})
    if (message.find(phrase) != std::string::npos) return true;
  return false;
}

TEST(GgufHostile, EveryProperPrefixOfTheSmallFileIsRejected) {
  const GgufBytes bytes = small_valid_file();
  for (size_t length = 0; length < bytes.size(); ++length) {
    SCOPED_TRACE("prefix of " + std::to_string(length) + " bytes");
    ::testing::AssertionResult rejected = rejected_mentioning(bytes.data(), length, {});
    ASSERT_TRUE(rejected);
    EXPECT_TRUE(says_something_is_missing(rejected.message())) << rejected.message();
  }
}

TEST(GgufHostile, EveryProperPrefixOfTheSmallFileIsRejectedThroughOpenToo) {
  // open() maps the file instead of copying it; truncation must be caught
  // before anything reads past the mapping (which would fault, not just misread).
  const GgufBytes bytes = small_valid_file();
  TempDir dir;
  const std::string path = dir.file("prefix.gguf");
  for (size_t length = 0; length < bytes.size(); ++length) {
    SCOPED_TRACE("prefix of " + std::to_string(length) + " bytes");
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(length));
    }
    Result<std::unique_ptr<GgufFile>> result = GgufFile::open(path);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().message().rfind(path + ": ", 0), 0u) << result.status().message();
    EXPECT_TRUE(says_something_is_missing(result.status().message())) << result.status().message();
  }
}

TEST(GgufHostile, EveryProperPrefixOfAShippedQuantFileIsRejected) {
  // A real llama.cpp-written file whose single tensor ends exactly at the end of the file.
  const std::vector<uint8_t> bytes = read_bytes(testdata("quant/Q2_K.gguf"));
  ASSERT_TRUE(parse(bytes.data(), bytes.size()).ok());
  for (size_t length = 0; length < bytes.size(); ++length) {
    SCOPED_TRACE("prefix of " + std::to_string(length) + " bytes");
    ::testing::AssertionResult rejected = rejected_mentioning(bytes.data(), length, {});
    ASSERT_TRUE(rejected);
    EXPECT_TRUE(says_something_is_missing(rejected.message())) << rejected.message();
  }
}

TEST(GgufHostile, HugeTensorAndMetadataCounts) {
  for (uint64_t count : {kHuge, kAllOnes, uint64_t{1000}}) {
    GgufBytes many_tensors = small_valid_file();
    many_tensors.patch<uint64_t>(8, count);
    EXPECT_TRUE(rejected_mentioning(many_tensors, {"tensor count", std::to_string(count)}));
    GgufBytes many_entries = small_valid_file();
    many_entries.patch<uint64_t>(16, count);
    EXPECT_TRUE(rejected_mentioning(many_entries, {"metadata count", std::to_string(count)}));
  }
}

TEST(GgufHostile, HugeStringLengths) {
  for (uint64_t length : {kHuge, kAllOnes, uint64_t{100}}) {
    SCOPED_TRACE(length);
    GgufBytes key;
    key.header(0, 1).u64(length).raw("general.name");
    EXPECT_TRUE(rejected_mentioning(key, {"metadata entry 0 key", "string length", std::to_string(length)}));

    GgufBytes value = one_entry("general.name", ValueType::STRING);
    value.u64(length).raw("abc");
    EXPECT_TRUE(rejected_mentioning(value, {"general.name", "string length"}));

    GgufBytes element = one_entry("tokenizer.ggml.tokens", ValueType::ARRAY);
    element.array_header(ValueType::STRING, 2).str("ok").u64(length).raw("x");
    EXPECT_TRUE(rejected_mentioning(element, {"tokenizer.ggml.tokens", "string length"}));

    GgufBytes name;
    name.header(1, 0).u64(length).raw("t").u32(1).u64(32).u32(0).u64(0);
    EXPECT_TRUE(rejected_mentioning(name, {"tensor 0 name", "string length"}));
  }
}

TEST(GgufHostile, HugeArrayCounts) {
  for (ValueType element : {ValueType::UINT8, ValueType::UINT64, ValueType::STRING, ValueType::ARRAY}) {
    for (uint64_t count : {kHuge, kAllOnes}) {
      GgufBytes b = one_entry("test.array", ValueType::ARRAY);
      b.array_header(element, count).zeros(64);
      EXPECT_TRUE(rejected_mentioning(b, {"test.array", "array of " + std::to_string(count), "cannot fit"}));
    }
  }
  // An inner array inside an outer one is checked against the bytes left too.
  GgufBytes nested = one_entry("test.nested", ValueType::ARRAY);
  nested.array_header(ValueType::ARRAY, 1).array_header(ValueType::INT32, kHuge).zeros(16);
  EXPECT_TRUE(rejected_mentioning(nested, {"test.nested", "cannot fit"}));
}

// Bytes that are really there can still be hostile: each value costs ~48
// bytes in memory, so the reader caps the number of metadata values.
TEST(GgufHostile, MetadataValueCountIsCapped) {
  constexpr uint64_t kCount = (uint64_t{16} << 20) + 1;
  GgufBytes b = one_entry("test.bytes", ValueType::ARRAY);
  b.array_header(ValueType::UINT8, kCount).zeros(kCount);
  // parse() copies the 16 MiB image, so the small-allocation watch does not apply.
  auto parsed = GgufFile::parse(b.bytes().data(), b.bytes().size());
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("test.bytes: array of 16777217 values exceeds the limit"), std::string::npos)
      << parsed.status().message();
}

TEST(GgufHostile, UnknownValueTypes) {
  for (uint32_t type : {13u, 255u, 0xFFFFFFFFu}) {
    GgufBytes top = one_entry("test.value", type);
    top.zeros(16);
    EXPECT_TRUE(rejected_mentioning(top, {"test.value", "unknown value type " + std::to_string(type)}));
    GgufBytes element = one_entry("test.array", ValueType::ARRAY);
    element.u32(type).u64(1).zeros(16);
    EXPECT_TRUE(rejected_mentioning(element, {"test.array", "unknown array element type"}));
  }
}

TEST(GgufHostile, UnknownTensorTypes) {
  // 4 and 5 are retired ggml types, 34 (TQ1_0) exists in ggml but not in revis.
  for (uint32_t type : {4u, 5u, 34u, 99u, 0xFFFFFFFFu}) {
    EXPECT_TRUE(rejected_mentioning(one_tensor({256}, type, 0, 1024),
                                    {"tensor 't'", "tensor type id " + std::to_string(type)}));
  }
}

TEST(GgufHostile, DimensionCountsOutsideOneToFour) {
  for (uint32_t n_dims : {0u, 5u, 0xFFFFFFFFu}) {
    GgufBytes b;
    b.header(1, 0).str("t").u32(n_dims);
    for (uint32_t d = 0; d < std::min(n_dims, 5u); ++d) b.u64(1);
    b.u32(0).u64(0).pad_to(32).zeros(64);
    EXPECT_TRUE(rejected_mentioning(b, {"tensor 't'", std::to_string(n_dims) + " dimensions"}));
  }
}

TEST(GgufHostile, ZeroAndEnormousDimensions) {
  EXPECT_TRUE(rejected_mentioning(one_tensor({0}, TensorType::F32, 0, 64), {"tensor 't'", "dimension 0 = 0"}));
  EXPECT_TRUE(rejected_mentioning(one_tensor({32, 0}, TensorType::F32, 0, 64), {"dimension 1 = 0"}));
  for (uint64_t dim : {kHuge, kAllOnes, (uint64_t{1} << 41)})
    EXPECT_TRUE(rejected_mentioning(one_tensor({dim}, TensorType::F32, 0, 64),
                                    {"tensor 't'", "dimension 0 = " + std::to_string(dim), "out of range"}));
}

TEST(GgufHostile, ElementCountsThatWouldOverflow) {
  // Each dimension alone is plausible; their product is not (2^96 and 2^80 elements).
  constexpr uint64_t k2to32 = uint64_t{1} << 32, k2to20 = uint64_t{1} << 20;
  EXPECT_TRUE(rejected_mentioning(one_tensor({k2to32, k2to32, k2to32}, TensorType::F32, 0, 64),
                                  {"tensor 't'", "dimension 1", "out of range"}));
  EXPECT_TRUE(rejected_mentioning(one_tensor({k2to20, k2to20, k2to20, k2to20}, TensorType::F32, 0, 64),
                                  {"tensor 't'", "dimension 2", "out of range"}));
  // A product that wraps to a small number modulo 2^64 must not slip through either.
  EXPECT_TRUE(rejected_mentioning(one_tensor({uint64_t{1} << 33, uint64_t{1} << 31}, TensorType::F32, 0, 64),
                                  {"tensor 't'", "dimension 1"}));
}

TEST(GgufHostile, RowLengthNotAMultipleOfTheBlockSize) {
  EXPECT_TRUE(rejected_mentioning(one_tensor({33, 2}, TensorType::Q8_0, 0, 256),
                                  {"tensor 't'", "row length 33", "Q8_0 block size 32"}));
  EXPECT_TRUE(rejected_mentioning(one_tensor({128}, TensorType::Q4_K, 0, 256),
                                  {"tensor 't'", "row length 128", "Q4_K block size 256"}));
  // The total element count being a multiple does not help: it is per row.
  EXPECT_TRUE(rejected_mentioning(one_tensor({16, 2}, TensorType::Q4_0, 0, 256), {"row length 16"}));
}

TEST(GgufHostile, TensorOffsetNotAligned) {
  EXPECT_TRUE(rejected_mentioning(one_tensor({4}, TensorType::F32, 4, 64),
                                  {"tensor 't'", "data offset 4", "alignment 32"}));
  GgufBytes wide;
  wide.header(1, 1).key("general.alignment", ValueType::UINT32).u32(64);
  wide.tensor_info("t", {4}, TensorType::F32, 32).pad_to(64).zeros(128);
  EXPECT_TRUE(rejected_mentioning(wide, {"tensor 't'", "data offset 32", "alignment 64"}));
}

TEST(GgufHostile, TensorDataPastTheEndOfTheFile) {
  // 16 bytes needed, 15 present.
  EXPECT_TRUE(rejected_mentioning(one_tensor({4}, TensorType::F32, 0, 15), {"tensor 't'", "past the end"}));
  // Aligned offsets beyond the 32 data bytes present. The tensor takes 32 bytes,
  // so the last offset plus the size wraps around 2^64 to exactly 0.
  for (uint64_t offset : {uint64_t{32}, uint64_t{1} << 40, kAllOnes - 31})
    EXPECT_TRUE(rejected_mentioning(one_tensor({8}, TensorType::F32, offset, 32),
                                    {"tensor 't'", "data [" + std::to_string(offset), "past the end"}));
  // The second of two tensors is the one that does not fit.
  GgufBytes two;
  two.header(2, 0).tensor_info("first", {8}, TensorType::F32, 0).tensor_info("second", {8}, TensorType::F32, 32);
  two.pad_to(32).zeros(32 + 16);
  EXPECT_TRUE(rejected_mentioning(two, {"tensor 'second'", "past the end"}));
  // A tensor table that promises data, in a file that ends inside the header padding.
  GgufBytes no_data;
  no_data.header(1, 0).tensor_info("t", {1}, TensorType::F32, 0);
  EXPECT_TRUE(rejected_mentioning(no_data, {"data section", "beyond the end"}));
}

TEST(GgufHostile, DuplicateKeysAndTensorNames) {
  GgufBytes keys;
  keys.header(0, 2).key("general.name", ValueType::STRING).str("a").key("general.name", ValueType::UINT8).u8(1);
  EXPECT_TRUE(rejected_mentioning(keys, {"general.name", "appears twice"}));

  GgufBytes tensors;
  tensors.header(2, 0).tensor_info("blk.0.w", {8}, TensorType::F32, 0).tensor_info("blk.0.w", {8}, TensorType::F32, 32);
  tensors.pad_to(32).zeros(64);
  EXPECT_TRUE(rejected_mentioning(tensors, {"tensor 'blk.0.w'", "appears twice"}));
}

TEST(GgufHostile, BadGeneralAlignment) {
  auto with_alignment = [](ValueType type, auto write_value) {
    GgufBytes b;
    b.header(1, 1).key("general.alignment", type);
    write_value(b);
    b.tensor_info("t", {8}, TensorType::F32, 0).pad_to(32).zeros(32);
    return b;
  };
  const std::vector<std::string> fragments = {"general.alignment", "power of two"};
  EXPECT_TRUE(rejected_mentioning(with_alignment(ValueType::UINT32, [](GgufBytes& b) { b.u32(0); }), fragments));
  EXPECT_TRUE(rejected_mentioning(with_alignment(ValueType::UINT32, [](GgufBytes& b) { b.u32(3); }), fragments));
  EXPECT_TRUE(rejected_mentioning(with_alignment(ValueType::UINT32, [](GgufBytes& b) { b.u32(96); }), fragments));
  EXPECT_TRUE(rejected_mentioning(with_alignment(ValueType::INT32, [](GgufBytes& b) { b.i32(-32); }), fragments));
  EXPECT_TRUE(
      rejected_mentioning(with_alignment(ValueType::UINT64, [](GgufBytes& b) { b.u64(uint64_t{1} << 63); }), fragments));
  EXPECT_TRUE(rejected_mentioning(with_alignment(ValueType::STRING, [](GgufBytes& b) { b.str("32"); }), fragments));
  EXPECT_TRUE(rejected_mentioning(with_alignment(ValueType::FLOAT32, [](GgufBytes& b) { b.f32(32.0f); }), fragments));
  EXPECT_TRUE(rejected_mentioning(with_alignment(ValueType::BOOL, [](GgufBytes& b) { b.u8(1); }), fragments));
  // A power of two so large that the data section would start beyond any file.
  EXPECT_TRUE(rejected_mentioning(with_alignment(ValueType::UINT64, [](GgufBytes& b) { b.u64(kHuge); }),
                                  {"data section", "beyond the end"}));
  // Any other integer width holding a power of two is accepted.
  GgufBytes u8_alignment = with_alignment(ValueType::UINT8, [](GgufBytes& b) { b.u8(16); });
  Result<std::unique_ptr<GgufFile>> accepted = parse(u8_alignment.data(), u8_alignment.size());
  ASSERT_TRUE(accepted.ok()) << accepted.status().message();
  EXPECT_EQ(accepted.value()->alignment(), 16u);
}

TEST(GgufHostile, BoolBytesOtherThanZeroOrOne) {
  GgufBytes scalar = one_entry("tokenizer.ggml.add_bos_token", ValueType::BOOL);
  scalar.u8(2);
  EXPECT_TRUE(rejected_mentioning(scalar, {"tokenizer.ggml.add_bos_token", "bool value 2"}));
  GgufBytes element = one_entry("test.flags", ValueType::ARRAY);
  element.array_header(ValueType::BOOL, 3).u8(0).u8(1).u8(255);
  EXPECT_TRUE(rejected_mentioning(element, {"test.flags", "bool value 255"}));
}

// An array value nested `depth` levels deep, each level holding one array, the innermost one empty.
GgufBytes nested_arrays(int depth) {
  GgufBytes b = one_entry("test.nested", ValueType::ARRAY);
  for (int level = 1; level < depth; ++level) b.array_header(ValueType::ARRAY, 1);
  b.array_header(ValueType::UINT8, 0);
  return b;
}

TEST(GgufHostile, ArraysNestedAThousandDeep) {
  EXPECT_TRUE(rejected_mentioning(nested_arrays(1000), {"test.nested", "nested deeper"}));
  // Modest nesting is legitimate.
  const GgufBytes three = nested_arrays(3);
  Result<std::unique_ptr<GgufFile>> result = parse(three.data(), three.size());
  ASSERT_TRUE(result.ok()) << result.status().message();
  const Array* outer = result.value()->find("test.nested")->as_array();
  ASSERT_NE(outer, nullptr);
  ASSERT_EQ(outer->items.size(), 1u);
  const Array* middle = outer->items[0].as_array();
  ASSERT_NE(middle, nullptr);
  ASSERT_EQ(middle->items.size(), 1u);
  EXPECT_EQ(middle->items[0].as_array()->element_type, ValueType::UINT8);
}

// One image holding a value of every shape the getters distinguish.
std::unique_ptr<GgufFile> file_of_every_shape() {
  GgufBytes b;
  b.header(0, 10);
  b.key("name", ValueType::STRING).str("llama");
  b.key("count", ValueType::UINT32).u32(7);
  b.key("flag", ValueType::BOOL).u8(1);
  b.key("scale", ValueType::FLOAT32).f32(0.25f);
  b.key("words", ValueType::ARRAY).array_header(ValueType::STRING, 2).str("a").str("b");
  b.key("scores", ValueType::ARRAY).array_header(ValueType::FLOAT32, 1).f32(1.5f);
  b.key("no_words", ValueType::ARRAY).array_header(ValueType::STRING, 0);
  b.key("layer_flags", ValueType::ARRAY).array_header(ValueType::BOOL, 3).u8(1).u8(0).u8(1);
  b.key("huge", ValueType::UINT64).u64(kAllOnes);
  b.key("huge_ids", ValueType::ARRAY).array_header(ValueType::UINT64, 2).u64(5).u64(uint64_t{1} << 63);
  Result<std::unique_ptr<GgufFile>> result = parse(b.data(), b.size());
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? std::move(*result) : nullptr;
}

template <typename T>
::testing::AssertionResult wrong_type_error(const Result<T>& result, const std::string& expected_message) {
  if (result.ok()) return ::testing::AssertionFailure() << "the getter succeeded";
  if (result.status().message() != expected_message)
    return ::testing::AssertionFailure() << "message: " << result.status().message();
  return ::testing::AssertionSuccess();
}

TEST(GgufHostile, GettersOnValuesOfTheWrongTypeNameBothTypes) {
  std::unique_ptr<GgufFile> file = file_of_every_shape();
  ASSERT_NE(file, nullptr);
  EXPECT_TRUE(wrong_type_error(file->get_int("name", 0), "name: expected an integer, found string"));
  EXPECT_TRUE(wrong_type_error(file->get_int("scale", 0), "scale: expected an integer, found f32"));
  EXPECT_TRUE(wrong_type_error(file->get_int("flag", 0), "flag: expected an integer, found bool"));
  EXPECT_TRUE(wrong_type_error(file->get_string("count"), "count: expected string, found u32"));
  EXPECT_TRUE(wrong_type_error(file->get_string("words"), "words: expected string, found array of string"));
  EXPECT_TRUE(wrong_type_error(file->get_float("name", 0), "name: expected a number, found string"));
  EXPECT_TRUE(wrong_type_error(file->get_float("flag", 0), "flag: expected a number, found bool"));
  EXPECT_TRUE(wrong_type_error(file->get_bool("count", false), "count: expected bool, found u32"));
  EXPECT_TRUE(wrong_type_error(file->get_string_array("scores"), "scores: expected array of string, found array of f32"));
  EXPECT_TRUE(wrong_type_error(file->get_string_array("name"), "name: expected array of string, found string"));
  EXPECT_TRUE(wrong_type_error(file->get_float_array("words"), "words: expected array of f32, found array of string"));
  EXPECT_TRUE(wrong_type_error(file->get_float_array("count"), "count: expected array of f32, found u32"));
  EXPECT_TRUE(wrong_type_error(file->get_int_array("words"), "words: expected array of integers, found array of string"));
  EXPECT_TRUE(wrong_type_error(file->get_int_array("scores"), "scores: expected array of integers, found array of f32"));
  // The element type decides, even when the array is empty.
  EXPECT_TRUE(
      wrong_type_error(file->get_int_array("no_words"), "no_words: expected array of integers, found array of string"));
  EXPECT_TRUE(wrong_type_error(file->get_float_array("no_words"), "no_words: expected array of f32, found array of string"));

  // Conversions that are allowed: an integer read as a float, booleans
  // (per-layer flags, gemma4's sliding_window_pattern) as integers 0 and 1.
  EXPECT_EQ(file->get_float("count", 0).value(), 7.0);
  EXPECT_EQ(file->get_int_array("layer_flags").value(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(file->get_float("scale", 0).value(), 0.25);
  EXPECT_TRUE(file->get_string_array("no_words").value().empty());
}

TEST(GgufHostile, UnsignedValuesBeyondInt64AreNotSilentlyNegative) {
  std::unique_ptr<GgufFile> file = file_of_every_shape();
  ASSERT_NE(file, nullptr);
  Result<int64_t> huge = file->get_int("huge", 0);
  ASSERT_FALSE(huge.ok()) << "read back as " << huge.value();
  EXPECT_NE(huge.status().message().find("huge"), std::string::npos) << huge.status().message();
  EXPECT_NE(huge.status().message().find("18446744073709551615"), std::string::npos) << huge.status().message();
  Result<std::vector<int64_t>> ids = file->get_int_array("huge_ids");
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("huge_ids"), std::string::npos) << ids.status().message();
  EXPECT_NE(ids.status().message().find("9223372036854775808"), std::string::npos) << ids.status().message();
  // The raw value stays available, unconverted.
  EXPECT_EQ(std::get<uint64_t>(file->find("huge")->data), kAllOnes);
  EXPECT_EQ(file->get_float("huge", 0).value(), 18446744073709551616.0);
}

TEST(GgufHostile, FloatToIntegerConversionIsDefinedForEveryDouble) {
  // Value::as_int is documented for floats too; converting NaN or an
  // out-of-range double with a plain cast is undefined behaviour.
  auto as_int = [](double d) { return Value{ValueType::FLOAT64, d}.as_int(); };
  EXPECT_EQ(as_int(2.9), 2);
  EXPECT_EQ(as_int(-2.9), -2);
  EXPECT_EQ(as_int(std::numeric_limits<double>::quiet_NaN()), 0);
  EXPECT_EQ(as_int(1e300), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(as_int(-1e300), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(as_int(std::numeric_limits<double>::infinity()), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(as_int(9223372036854775808.0), std::numeric_limits<int64_t>::max());  // 2^63, just out of range
  EXPECT_EQ(as_int(-9223372036854775808.0), std::numeric_limits<int64_t>::min());  // -2^63, just in range
}

}  // namespace
}  // namespace revis::gguf
