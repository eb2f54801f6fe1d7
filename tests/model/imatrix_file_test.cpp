// Importance matrices: llama.cpp's GGUF files in testdata/moe2bit/imatrix
// load with the shapes of their models, and both formats round-trip.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "gguf/gguf.h"
#include "support/testdata.h"
#include "tools/imatrix_file.h"

namespace revis {
namespace {

using testing::testdata;

// Every entry names a matrix of the model the imatrix was collected on,
// with that matrix's row length and (for merged experts) expert count.
void expect_fits_model(const Imatrix& imatrix, const std::string& model_file) {
  auto model = gguf::GgufFile::open(model_file);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ASSERT_FALSE(imatrix.entries.empty());
  for (const auto& [name, entry] : imatrix.entries) {
    const gguf::TensorInfo* t = (*model)->tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(entry.n_per_row, t->dims[0]) << name;
    EXPECT_EQ(entry.n_mat, t->dims.size() == 3 ? t->dims[2] : 1) << name;
    for (int64_t m = 0; m < entry.n_mat; ++m) {
      auto importance = imatrix.importance(name, t->dims[0], m);
      ASSERT_TRUE(importance.ok()) << importance.status().message();
      if (entry.counts[m] == 0) continue;  // an expert the text never routed to
      ASSERT_EQ(importance->size(), static_cast<size_t>(t->dims[0])) << name;
      for (float v : *importance) ASSERT_TRUE(std::isfinite(v) && v >= 0) << name << " expert " << m;
    }
  }
}

TEST(Imatrix, ReadsLlamaCppGgufFiles) {
  auto moe = read_imatrix(testdata("moe2bit/imatrix/qwen3moe.imatrix.gguf"));
  ASSERT_TRUE(moe.ok()) << moe.status().message();
  EXPECT_EQ(moe->chunk_count, 150);
  EXPECT_EQ(moe->chunk_size, 128);
  ASSERT_EQ(moe->datasets.size(), 1u);
  // The routed experts come as one entry of 8 matrices.
  const auto it = moe->entries.find("blk.1.ffn_up_exps.weight");
  ASSERT_NE(it, moe->entries.end());
  EXPECT_EQ(it->second.n_mat, 8);
  expect_fits_model(*moe, testdata("models/qwen3moe-F16.gguf"));

  auto dense = read_imatrix(testdata("moe2bit/imatrix/llama-spm.imatrix.gguf"));
  ASSERT_TRUE(dense.ok()) << dense.status().message();
  expect_fits_model(*dense, testdata("models/llama-spm-F16.gguf"));
}

void expect_same_importance(const Imatrix& a, const Imatrix& b) {
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (const auto& [name, entry] : a.entries) {
    for (int64_t m = 0; m < entry.n_mat; ++m) {
      auto want = a.importance(name, entry.n_per_row, m);
      auto got = b.importance(name, entry.n_per_row, m);
      ASSERT_TRUE(want.ok() && got.ok()) << name;
      ASSERT_EQ(got->size(), want->size()) << name << " expert " << m;
      for (size_t i = 0; i < want->size(); ++i)
        ASSERT_NEAR((*got)[i], (*want)[i], 1e-6f * std::fabs((*want)[i])) << name << " expert " << m << " channel " << i;
    }
  }
}

TEST(Imatrix, RoundTripsThroughBothFormats) {
  auto original = read_imatrix(testdata("moe2bit/imatrix/qwen3moe.imatrix.gguf"));
  ASSERT_TRUE(original.ok()) << original.status().message();
  testing::TempDir dir;

  ASSERT_TRUE(write_imatrix_gguf(*original, dir.file("copy.gguf")).ok());
  auto gguf_copy = read_imatrix(dir.file("copy.gguf"));
  ASSERT_TRUE(gguf_copy.ok()) << gguf_copy.status().message();
  EXPECT_EQ(gguf_copy->datasets, original->datasets);
  EXPECT_EQ(gguf_copy->chunk_count, original->chunk_count);
  EXPECT_EQ(gguf_copy->chunk_size, original->chunk_size);
  for (const auto& [name, entry] : original->entries) {
    EXPECT_EQ(gguf_copy->entries.at(name).sum2, entry.sum2) << name;
    EXPECT_EQ(gguf_copy->entries.at(name).counts, entry.counts) << name;
  }

  // .dat keeps the means (one count per entry), the chunk count and the
  // dataset; experts read back as one row, split against the row length.
  ASSERT_TRUE(write_imatrix_dat(*original, dir.file("copy.dat")).ok());
  auto dat_copy = read_imatrix(dir.file("copy.dat"));
  ASSERT_TRUE(dat_copy.ok()) << dat_copy.status().message();
  EXPECT_EQ(dat_copy->chunk_count, original->chunk_count);
  EXPECT_EQ(dat_copy->datasets, original->datasets);
  expect_same_importance(*original, *dat_copy);
}

TEST(Imatrix, BadFilesAreErrorsNamingTheField) {
  testing::TempDir dir;
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir.file(name), std::ios::binary) << bytes;
    return dir.file(name);
  };
  EXPECT_FALSE(read_imatrix(dir.file("missing.dat")).ok());
  auto empty = read_imatrix(write("empty.dat", ""));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("entry count"), std::string::npos) << empty.status().message();
  // One entry whose name claims more bytes than the file has.
  auto truncated = read_imatrix(write("truncated.dat", std::string("\x01\x00\x00\x00\x10\x00\x00\x00" "abc", 11)));
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("name"), std::string::npos) << truncated.status().message();
  // A model file is GGUF but not an importance matrix.
  auto model = read_imatrix(testdata("models/qwen3moe-F16.gguf"));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("general.type"), std::string::npos) << model.status().message();
  // An entry that does not fit the matrix it is asked for.
  auto moe = read_imatrix(testdata("moe2bit/imatrix/qwen3moe.imatrix.gguf"));
  ASSERT_TRUE(moe.ok());
  EXPECT_FALSE(moe->importance("blk.1.ffn_up_exps.weight", 100, 0).ok());
  EXPECT_FALSE(moe->importance("blk.1.ffn_up_exps.weight", 256, 8).ok());
  auto absent = moe->importance("no.such.weight", 256, 0);
  ASSERT_TRUE(absent.ok());
  EXPECT_TRUE(absent->empty());
}

}  // namespace
}  // namespace revis
