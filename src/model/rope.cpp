#include "model/rope.h"

#include <algorithm>
#include <utility>

namespace revis {

// The float steps follow llama.cpp's (llama-context.cpp, the deepseek2
// graph, ggml's rope_yarn) so that the keys rounded to float16 in the cache
// round the same way.
Rope::Rope(const ModelConfig& c, std::vector<float> freq_factors)
    : pairs_(c.rope_dims / 2),
      neox_(c.rope_layout == RopeLayout::kNeox),
      freq_scale_(c.rope_freq_scale),
      theta_scale_(std::pow(c.rope_base, -2.0f / static_cast<float>(c.rope_dims))),
      freq_factors_(std::move(freq_factors)) {
  float attn_factor = 1.0f;
  if (c.rope_yarn) {
    const float factor = 1.0f / c.rope_freq_scale;
    const float interpolation_gain = 1.0f + 0.1f * std::log(factor);
    // The file's yarn_log_multiplier is 0.1 * mscale_all_dim (the
    // converter's convention); DeepSeek V2/V3 have mscale_all_dim 1 (or
    // 0.707). YaRN's magnitude gain 0.1 ln(factor) + 1 (the "mscale"):
    // DeepSeek puts its share from yarn_log_multiplier on the attention
    // scores instead of on cos and sin (model.cpp), and ggml's rope
    // multiplies cos and sin by the interpolation gain, which attn_factor
    // cancels.
    const float mscale_all_dim = c.yarn.log_multiplier / 0.1f;
    auto gain = [&](float m) { return factor <= 1.0f ? 1.0f : 0.1f * m * std::log(factor) + 1.0f; };
    if (mscale_all_dim != 0.0f) {
      const float m = c.arch == Architecture::kDeepseek2 && mscale_all_dim != 1.0f ? mscale_all_dim : 1.0f;
      attn_factor = gain(m) / gain(mscale_all_dim);
    } else {
      attn_factor = gain(1.0f);
    }
    attn_factor *= 1.0f / interpolation_gain;
    magnitude_ = attn_factor * c.yarn.attn_factor * interpolation_gain;

    // Pairs below `low` turn fast enough over the original context to keep
    // their theta; above `high`, slow enough to be interpolated.
    auto corr_dim = [&](float turns) {
      return static_cast<float>(c.rope_dims) *
             std::log(static_cast<float>(c.yarn.n_ctx_orig) / (turns * 2 * static_cast<float>(M_PI))) /
             (2 * std::log(c.rope_base));
    };
    const float low = std::max(0.0f, std::floor(corr_dim(c.yarn.beta_fast)));
    const float high = std::min(static_cast<float>(c.rope_dims - 1), std::ceil(corr_dim(c.yarn.beta_slow)));
    for (int i = 0; i < pairs_; ++i) {
      const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
      yarn_mix_.push_back(1.0f - std::min(1.0f, std::max(0.0f, y)));
    }
  } else {
    magnitude_ = c.yarn.attn_factor;
  }
  const int sections = c.rope_sections[0] + c.rope_sections[1] + c.rope_sections[2] + c.rope_sections[3];
  if (sections > 0) {
    // Interleaved M-RoPE: pair i falls in sector i mod (the sections' sum);
    // sectors 0, 3, 6, ... below 3 * sections[0] turn by time, 1, 4, ...
    // below 3 * sections[1] by height, 2, 5, ... below 3 * sections[2] by
    // width, the rest by the fourth position. A text token's first three
    // positions are its own, its fourth 0.
    const int* sec = c.rope_sections;
    for (int i = 0; i < pairs_; ++i) {
      const int sector = i % sections;
      const bool by_position = sector < 3 * sec[sector % 3];
      still_.push_back(!by_position);
    }
  }
}

void Rope::apply(float* head, int pos) const { rotate(head, pos, 1.0f); }

void Rope::unapply(float* head, int pos) const { rotate(head, pos, -1.0f); }

void Rope::rotate(float* head, int pos, float direction) const {
  for_each_angle(pos, [&](int i, float theta) {
    const float cos_t = std::cos(theta) * magnitude_, sin_t = direction * std::sin(theta) * magnitude_;
    float& a = neox_ ? head[i] : head[2 * i];
    float& b = neox_ ? head[i + pairs_] : head[2 * i + 1];
    const float a0 = a, b0 = b;
    a = a0 * cos_t - b0 * sin_t;
    b = a0 * sin_t + b0 * cos_t;
  });
}

}  // namespace revis
