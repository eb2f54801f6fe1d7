// revis imatrix end to end on a synthetic model: the file it writes reads
// back with the sums of a direct computation, a run cut short and continued
// writes the same file as one whole run, and quantize takes it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "support/imatrix_reference.h"
#include "support/run_command.h"
#include "support/testdata.h"
#include "tokenizer/tokenizer.h"
#include "tools/imatrix_file.h"

namespace revis {
namespace {

using testing::run_revis;
using testing::shell_quote;
using testing::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ImatrixCommand, MatchesADirectComputationResumesAndFeedsQuantize) {
  TempDir tmp;
  const std::string model = tmp.file("m.gguf"), text = tmp.file("text.txt");
  // Llama 2's vocabulary: a model that adds BOS, where the chunking matters.
  ASSERT_EQ(run_revis("mkmodel --arch llama --layers 2 --type F16 --vocab-from " +
                      shell_quote(testing::testdata("models/llama-spm-F16.gguf").string()) + " -o " +
                      shell_quote(model))
                .exit_code,
            0);
  {
    std::ofstream out(text);
    for (int i = 0; i < 40; ++i) out << "The quick brown fox jumps over the lazy dog, line " << i << ".\n";
  }
  const std::string args = "imatrix -m " + shell_quote(model) + " -f " + shell_quote(text) + " -c 64 -t 2 -o ";
  const std::string whole = tmp.file("whole.gguf"), resumed = tmp.file("resumed.gguf");
  const auto r = run_revis(args + shell_quote(whole));
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // Read back: layer 0's attn_q against the same chunks computed directly.
  auto file = gguf::GgufFile::open(model);
  ASSERT_TRUE(file.ok());
  auto tokenizer = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tokenizer.ok());
  // As llama-imatrix cuts it: BOS before the whole text, then BOS first in every chunk.
  ASSERT_TRUE((*tokenizer)->add_bos_default());
  const std::vector<int32_t> all = (*tokenizer)->encode(slurp(text), true, false);
  const size_t n_chunks = all.size() / 64;
  ASSERT_GE(n_chunks, 3u);
  std::vector<int32_t> used(all.begin(), all.begin() + static_cast<long>(n_chunks * 64));
  for (size_t c = 0; c < n_chunks; ++c) used[c * 64] = (*tokenizer)->bos();
  auto eps = (*file)->get_float("llama.attention.layer_norm_rms_epsilon", 1e-5);
  ASSERT_TRUE(eps.ok());
  const std::vector<double> expected = testing::attn_q_input_squares(**file, used, static_cast<float>(*eps));
  auto imatrix = read_imatrix(whole);
  ASSERT_TRUE(imatrix.ok()) << imatrix.status().message();
  EXPECT_EQ(imatrix->chunk_count, static_cast<int64_t>(n_chunks));
  EXPECT_EQ(imatrix->chunk_size, 64);
  const ImatrixEntry& q = imatrix->entries.at("blk.0.attn_q.weight");
  ASSERT_EQ(q.sum2.size(), expected.size());
  EXPECT_EQ(q.counts, std::vector<float>{static_cast<float>(used.size())});
  for (size_t j = 0; j < expected.size(); ++j) EXPECT_NEAR(q.sum2[j], expected[j], 1e-4 * expected[j] + 1e-6) << j;

  // Two chunks, then the rest: the same bytes as the whole run.
  ASSERT_EQ(run_revis(args + shell_quote(resumed) + " --chunk 2").exit_code, 0);
  EXPECT_EQ(read_imatrix(resumed)->chunk_count, 2);
  const auto rest = run_revis(args + shell_quote(resumed));
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_NE(rest.err.find("continuing after chunk 2"), std::string::npos) << rest.err;
  EXPECT_EQ(slurp(resumed), slurp(whole));

  // Another chunk size does not silently mix with the file's sums.
  const auto other = run_revis("imatrix -m " + shell_quote(model) + " -f " + shell_quote(text) + " -c 32 -o " +
                               shell_quote(resumed));
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("start afresh"), std::string::npos) << other.err;

  const auto q2 = run_revis("quantize --imatrix " + shell_quote(whole) + " " + shell_quote(model) + " " +
                            shell_quote(tmp.file("q.gguf")) + " IQ2_XS");
  ASSERT_EQ(q2.exit_code, 0) << q2.err;
  // The same mix named as a recipe; naming it twice, or not at all, is a usage error.
  const auto recipe = run_revis("quantize --imatrix " + shell_quote(whole) + " " + shell_quote(model) + " " +
                                shell_quote(tmp.file("r.gguf")) + " --recipe iq2_xs");
  ASSERT_EQ(recipe.exit_code, 0) << recipe.err;
  EXPECT_EQ(slurp(tmp.file("r.gguf")), slurp(tmp.file("q.gguf")));
  EXPECT_EQ(run_revis("quantize " + shell_quote(model) + " " + shell_quote(tmp.file("x.gguf")) + " Q8_0 --recipe q8_0")
                .exit_code,
            2);
  const auto unnamed = run_revis("quantize " + shell_quote(model) + " " + shell_quote(tmp.file("x.gguf")));
  EXPECT_EQ(unnamed.exit_code, 2);
  EXPECT_NE(unnamed.err.find("--recipe"), std::string::npos) << unnamed.err;
  const auto no_imatrix = run_revis("quantize " + shell_quote(model) + " " + shell_quote(tmp.file("q2.gguf")) + " IQ2_XS");
  EXPECT_NE(no_imatrix.exit_code, 0);
  EXPECT_NE(no_imatrix.err.find("needs an importance matrix"), std::string::npos) << no_imatrix.err;
}

}  // namespace
}  // namespace revis
