// The MOE-2BIT mix: the shared qwen3moe F16 model quantized with the shared
// importance matrix, judged by its logits against the F16 model's (llama.cpp's
// golden logits for qwen3moe-F16), next to llama.cpp's own MOE2 file of the
// same recipe and imatrix (testdata/moe2bit/models/qwen3moe-MOE2.gguf).
// MOE-3BIT, made the same way, against that file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "revis/engine.h"
#include "support/golden.h"
#include "support/testdata.h"
#include "tools/imatrix_file.h"
#include "tools/quantize.h"

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

// The shared qwen3moe F16 model quantized to `mix` with the shared imatrix:
// the file's path in `dir` (a test failure where that fails).
std::string quantized_shared_moe(const testing::TempDir& dir, QuantMix mix) {
  const std::string out = dir.file(std::string("qwen3moe-") + quant_mix_name(mix) + ".gguf");
  auto imatrix = read_imatrix(testdata("moe2bit/imatrix/qwen3moe.imatrix.gguf"));
  EXPECT_TRUE(imatrix.ok()) << imatrix.status().message();
  if (!imatrix.ok()) return out;
  ThreadPool pool(2);
  Status s = quantize_model(testdata("models/qwen3moe-F16.gguf").string(), out, mix, pool, nullptr, &*imatrix);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

TEST(QuantizeMoe2Bit, StaysWithin15PercentOfLlamaCppsMoe2File) {
  testing::TempDir dir;
  const std::string ours = quantized_shared_moe(dir, QuantMix::kMoe2Bit);

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

// MOE-3BIT, the same shape a step up (IQ3_XXS gate/up, IQ4_XS down), with
// the same imatrix: its routed experts are quantized as the recipe says,
// and its logits stand clearly closer to the F16 model's than the 2-bit
// file's.
TEST(QuantizeMoe3Bit, RunsCloserToF16ThanMoe2Bit) {
  testing::TempDir dir;
  const std::string ours = quantized_shared_moe(dir, QuantMix::kMoe3Bit);
  auto written = gguf::GgufFile::open(ours);
  ASSERT_TRUE(written.ok());
  for (const gguf::TensorInfo& t : (*written)->tensors()) {
    const bool expert = t.name.find("_exps") != std::string::npos;
    const TensorType expected = t.name.find("ffn_down_exps") != std::string::npos ? TensorType::IQ4_XS
                                : expert                                       ? TensorType::IQ3_XXS
                                : t.dims.size() < 2 || t.name.find("ffn_gate_inp") != std::string::npos
                                    ? TensorType::F32
                                    : TensorType::Q8_0;
    EXPECT_EQ(type_name(t.type), std::string(type_name(expected))) << t.name;
  }
  const testing::GoldenCase f16 = testing::load_golden("qwen3moe-F16.en");
  const double three = mean_error_against_f16(ours, f16);
  const double two = mean_error_against_f16(testdata("moe2bit/models/qwen3moe-MOE2.gguf").string(), f16);
  std::printf("en: mean logit error against F16: MOE-3BIT %.4f, llama.cpp's MOE2 %.4f\n", three, two);
  EXPECT_LT(three, 0.7 * two);
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
