// Four-token kernels that claim each token's very bits of the one-token
// kernel (quant.h's DotKernels::dot4_exact, packed1's PackedDot::dot4), on
// every backend this CPU runs: a model's stepwise prefill takes matrices
// stored as rows (mapped) four tokens at a time through them and stays
// batch-invariant (src/model/matmul.h).
#include <bit>
#include <vector>

#include <gtest/gtest.h>

#include "quant/quant.h"
#include "quant/types.h"
#include "test_util.h"

namespace revis {
namespace {

constexpr int64_t kCols = 1024;
constexpr int kRows = 5;

using ExactDot4 = quant_test::OnEveryBackend;

TEST_P(ExactDot4, EveryTokenGetsTheOneTokenKernelsBits) {
  int checked = 0;
  for (TensorType type : quant_test::weight_types()) {
    if (!can_quantize(type)) continue;
    const DotKernels k = dot_kernels(type, kCols);
    const bool packed = k.packed1 && k.packed1->dot4;
    if (!packed && !(k.dot4 && k.dot4_exact)) continue;
    ++checked;
    const TensorType a_type = activation_type(type);
    const size_t a_row = row_bytes(a_type, kCols);
    uint32_t seed = 31 * static_cast<uint32_t>(type);
    std::vector<uint8_t> tokens(4 * a_row);
    for (int t = 0; t < 4; ++t) {
      const std::vector<float> x = quant_test::gaussian(kCols, seed++, 1.0f + t);
      quantize_row(a_type, x.data(), tokens.data() + t * a_row, kCols);
    }
    // Each token packed alone, one after another, as MatMul packs single tokens.
    const size_t p_row = packed ? k.packed1->bytes(kCols) : 0;
    std::vector<uint8_t> singles(4 * p_row);
    for (int t = 0; t < 4 && packed; ++t)
      k.packed1->pack(tokens.data() + t * a_row, a_row, kCols, singles.data() + t * p_row);
    for (int r = 0; r < kRows; ++r) {
      const std::vector<float> x = quant_test::gaussian(kCols, seed++, 0.3f + 0.2f * r);
      std::vector<uint8_t> w(row_bytes(type, kCols));
      quantize_row(type, x.data(), w.data(), kCols);
      float four[4];
      if (packed)
        k.packed1->dot4(w.data(), singles.data(), p_row, kCols, four);
      else
        k.dot4(w.data(), tokens.data(), a_row, kCols, four);
      for (int t = 0; t < 4; ++t) {
        float one;
        if (packed)
          k.packed1->dot(w.data(), singles.data() + t * p_row, kCols, &one);
        else
          one = k.dot(w.data(), tokens.data() + t * a_row, kCols);
        EXPECT_EQ(std::bit_cast<uint32_t>(four[t]), std::bit_cast<uint32_t>(one))
            << type_name(type) << ", row " << r << ", token " << t;
      }
    }
  }
  std::printf("%s: %d types with an exact four-token kernel\n", kernel_backend_name(GetParam()), checked);
  // AVX-512's K-quants (Q4_K through packed1) have one.
  if (GetParam() == KernelBackend::kAvx512) EXPECT_GE(checked, 5);
}

INSTANTIATE_TEST_SUITE_P(Backends, ExactDot4, ::testing::ValuesIn(kKernelBackends),
                         quant_test::BackendName());

}  // namespace
}  // namespace revis
