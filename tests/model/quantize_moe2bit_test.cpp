// The MOE-2BIT mix: the shared qwen3moe F16 model quantized with the shared
// importance matrix, judged by its logits against the F16 model's (llama.cpp's
// golden logits for qwen3moe-F16), next to llama.cpp's own MOE2 file of the
// same recipe and imatrix (testdata/moe2bit/models/qwen3moe-MOE2.gguf).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/imatrix_file.h"
#include "model/quantize.h"
#include "revis/engine.h"
#include "support/golden.h"
#include "support/testdata.h"

namespace revis {
namespace {

using testing::testdata;

// Mean over the golden positions of max_j |ours - F16| / rms(F16).
double mean_error_against_f16(const std::string& model_file, const testing::GoldenCase& f16) {
  auto engine = Engine::load({.model_path = model_file, .n_ctx = 512, .n_threads = 2});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return 1e9;
  std::vector<int32_t> tokens = f16.prompt_tokens;
  tokens.insert(tokens.end(), f16.greedy.begin(), f16.greedy.end() - 1);
  auto session = (*engine)->new_session();
  Status s = session->eval(tokens, /*all_logits=*/true);
  EXPECT_TRUE(s.ok()) << s.message();
  double sum = 0;
  for (int k = 0; k < f16.n_rows; ++k) sum += testing::logit_error(session->logits(k).data(), f16.row(k), f16.n_vocab);
  return sum / f16.n_rows;
}

TEST(QuantizeMoe2Bit, StaysWithin15PercentOfLlamaCppsMoe2File) {
  auto imatrix = read_imatrix(testdata("moe2bit/imatrix/qwen3moe.imatrix.gguf"));
  ASSERT_TRUE(imatrix.ok()) << imatrix.status().message();
  testing::TempDir dir;
  const std::string ours = dir.file("qwen3moe-MOE2.gguf");
  ThreadPool pool(2);
  Status s = quantize_model(testdata("models/qwen3moe-F16.gguf").string(), ours, QuantMix::kMoe2Bit, pool, nullptr,
                            &*imatrix);
  ASSERT_TRUE(s.ok()) << s.message();

  // The recipe's types, tensor by tensor, as llama.cpp's file has them.
  auto written = gguf::GgufFile::open(ours);
  auto reference = gguf::GgufFile::open(testdata("moe2bit/models/qwen3moe-MOE2.gguf").string());
  ASSERT_TRUE(written.ok() && reference.ok());
  for (const gguf::TensorInfo& t : (*reference)->tensors()) {
    const gguf::TensorInfo* mine = (*written)->tensor(t.name);
    ASSERT_NE(mine, nullptr) << t.name;
    EXPECT_EQ(type_name(mine->type), std::string(type_name(t.type))) << t.name;
  }

  for (const char* text : {"en", "code"}) {
    const testing::GoldenCase f16 = testing::load_golden(std::string("qwen3moe-F16.") + text);
    const double our_error = mean_error_against_f16(ours, f16);
    const double their_error = mean_error_against_f16(testdata("moe2bit/models/qwen3moe-MOE2.gguf").string(), f16);
    std::printf("%s: mean logit error against F16: ours %.4f, llama.cpp's MOE2 %.4f\n", text, our_error, their_error);
    EXPECT_LE(our_error, 1.15 * their_error) << text;
  }
}

TEST(QuantizeMoe2Bit, RefusesWithoutAnImportanceMatrix) {
  testing::TempDir dir;
  ThreadPool pool(1);
  Status s = quantize_model(testdata("models/qwen3moe-F16.gguf").string(), dir.file("out.gguf"), QuantMix::kMoe2Bit,
                            pool, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs an importance matrix"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace revis
