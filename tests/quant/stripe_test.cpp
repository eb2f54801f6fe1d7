// Stripe forms (quant.h's stripe_form) on every backend this CPU runs: a
// row's product with a token is the same bits whichever kernel takes it
// (dot with four tokens, dot_one with that token alone, lane_dot with the
// row where it is stored) and whichever rows share its stripe. That is what batch invariance rests on for matrices
// kept or read in stripes (src/model/matmul.h).
#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "quant/quant.h"
#include "quant/types.h"
#include "test_util.h"

namespace revis {
namespace {

// The types whose stripe forms feed a model's prefill, and a row length of
// several blocks and slices (n = 512 also has Q4_K's whole super-blocks).
constexpr TensorType kStripedTypes[] = {TensorType::F16, TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K,
                                        TensorType::Q6_K, TensorType::MXFP4};
constexpr int64_t kCols = 512;

std::vector<uint8_t> quantized(TensorType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(row_bytes(type, static_cast<int64_t>(x.size())));
  quantize_row(type, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

using StripeForms = quant_test::OnEveryBackend;

TEST_P(StripeForms, EveryRowIsTheSameBitsAloneOrAmongOthers) {
  int forms = 0, lane_forms = 0;
  for (TensorType type : kStripedTypes) {
    const PackedDot* form = stripe_form(type, kCols);
    if (!form) continue;
    ++forms;
    const int rows = form->weight_rows;
    const TensorType a_type = activation_type(type);
    const size_t w_row = row_bytes(type, kCols), a_row = row_bytes(a_type, kCols);

    // rows - 1 distinct rows (the stripe's last filled up), four tokens.
    uint32_t seed = 17 * static_cast<uint32_t>(type);
    std::vector<uint8_t> weights;
    for (int r = 0; r + 1 < rows; ++r) {
      const std::vector<uint8_t> row = quantized(type, quant_test::gaussian(kCols, seed++, 0.5f + 0.1f * r));
      weights.insert(weights.end(), row.begin(), row.end());
    }
    std::vector<uint8_t> tokens;
    for (int t = 0; t < 4; ++t) {
      const std::vector<uint8_t> row = quantized(a_type, quant_test::gaussian(kCols, seed++, 1.0f + t));
      tokens.insert(tokens.end(), row.begin(), row.end());
    }
    std::vector<uint8_t> stripe(rows * form->weight_bytes(kCols)), group(form->bytes(kCols));
    form->repack_weights(weights.data(), w_row, rows - 1, kCols, stripe.data());
    form->pack(tokens.data(), a_row, kCols, group.data());
    std::vector<float> four(4 * rows);
    form->dot(stripe.data(), group.data(), kCols, four.data());

    for (int t = 0; t < 4; ++t) {
      // Token t first in a group whose other tokens are random bytes.
      std::vector<uint8_t> alone(tokens.size());
      std::mt19937 rng(seed++);
      for (uint8_t& b : alone) b = static_cast<uint8_t>(rng());
      std::memcpy(alone.data(), tokens.data() + t * a_row, a_row);
      std::vector<uint8_t> packed(form->bytes(kCols));
      form->pack(alone.data(), a_row, kCols, packed.data());
      std::vector<float> one(rows);
      form->dot_one(stripe.data(), packed.data(), kCols, one.data());
      for (int r = 0; r < rows; ++r)
        EXPECT_EQ(std::bit_cast<uint32_t>(one[r]), std::bit_cast<uint32_t>(four[t * rows + r]))
            << type_name(type) << ": row " << r << ", token " << t << ", dot_one against dot";
      EXPECT_EQ(std::bit_cast<uint32_t>(four[t * rows + rows - 1]), 0u) << type_name(type) << ": the filled-up row";
    }
    // A row where it is stored, through lane_dot where the form has one:
    // the same bits as in its stripe.
    if (form->lane_dot) {
      ++lane_forms;
      for (int r = 0; r + 1 < rows; ++r)
        for (int t = 0; t < 4; ++t) {
          const float dot = form->lane_dot(weights.data() + r * w_row, tokens.data() + t * a_row, kCols);
          EXPECT_EQ(std::bit_cast<uint32_t>(dot), std::bit_cast<uint32_t>(four[t * rows + r]))
              << type_name(type) << ": row " << r << ", token " << t << ", lane_dot against dot";
        }
    }
    // Each row alone in a stripe, at its first place: the same bits as
    // beside the others.
    for (int r = 0; r + 1 < rows; ++r) {
      std::vector<uint8_t> lone(stripe.size());
      form->repack_weights(weights.data() + r * w_row, w_row, 1, kCols, lone.data());
      std::vector<float> dots(4 * rows);
      form->dot(lone.data(), group.data(), kCols, dots.data());
      for (int t = 0; t < 4; ++t)
        EXPECT_EQ(std::bit_cast<uint32_t>(dots[t * rows]), std::bit_cast<uint32_t>(four[t * rows + r]))
            << type_name(type) << ": row " << r << " alone in its stripe, token " << t;
    }
  }
  std::printf("%s: %d stripe forms checked, %d with lane_dot\n", kernel_backend_name(GetParam()), forms, lane_forms);
  if (GetParam() == KernelBackend::kAvx512) {
    EXPECT_EQ(forms, 6);       // every type listed
    EXPECT_EQ(lane_forms, 2);  // Q4_K and Q6_K, the types of Q4_K_M files
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, StripeForms, ::testing::ValuesIn(kKernelBackends),
                         quant_test::BackendName());

}  // namespace
}  // namespace revis
