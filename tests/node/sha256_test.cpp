// SHA-256 against the FIPS 180-4 examples, and the model file digest.
#include <gtest/gtest.h>

#include <fstream>

#include "node/model_digest.h"
#include "node/sha256.h"
#include "support/testdata.h"

namespace revis::node {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string a(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.update(a);
  EXPECT_EQ(million.finish_hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, SplitUpdatesEqualOneUpdate) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += static_cast<char>(i * 7);
  for (size_t cut = 0; cut <= text.size(); cut += 13) {
    Sha256 h;
    h.update(std::string_view(text).substr(0, cut));
    h.update(std::string_view(text).substr(cut));
    EXPECT_EQ(h.finish_hex(), sha256_hex(text)) << "cut at " << cut;
  }
}

TEST(ModelDigest, SmallFileIsItsPlainSha256) {
  const auto path = testing::testdata("models/qwen2-Q8_0.gguf");
  const auto bytes = testing::read_bytes(path);
  auto digest = model_file_digest(path.string());
  ASSERT_TRUE(digest.ok()) << digest.status().message();
  EXPECT_EQ(*digest, "sha256:" + sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
  auto other = model_file_digest(testing::testdata("models/qwen2-Q4_0.gguf").string());
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*digest, *other);
}

TEST(ModelDigest, LargeFileIsSampledAndSeesChanges) {
  testing::TempDir tmp;
  const std::string path = tmp.file("big.bin");
  {
    std::ofstream out(path, std::ios::binary);
    std::string block(1 << 20, 'x');
    for (int i = 0; i < 40; ++i) out << block;  // 40 MiB: above the whole-file limit
  }
  auto a = model_file_digest(path);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->rfind("sha256-sampled:", 0), 0u) << *a;
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(20);  // inside the first 4 MiB
    f.put('y');
  }
  auto b = model_file_digest(path);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_FALSE(model_file_digest(tmp.file("missing.gguf")).ok());
}

}  // namespace
}  // namespace revis::node
