// Rope: rotary position embedding with the scalings a GGUF file asks for,
// for every architecture: linear (rope.scaling.type = linear: positions
// times 1/factor), YaRN (rope.scaling.type = yarn: linear for the pairs
// that turn slowly over the original context, unscaled for the fast ones, a
// ramp between, and cos and sin grown by YaRN's magnitude gain), and Llama
// 3's per-pair frequency factors (the rope_freqs tensor: theta divided by
// factor i), which may combine with either; and M-RoPE's sections for
// text (qwen35: config.h's rope_sections). Immutable after construction;
// any thread may use it.
#pragma once

#include <cmath>
#include <vector>

#include "model/config.h"

namespace revis {

class Rope {
 public:
  Rope() = default;
  // freq_factors: rope_dims / 2 values, or empty.
  Rope(const ModelConfig& c, std::vector<float> freq_factors);

  // Calls visit(i, theta) for each pair i < rope_dims / 2 with the angle, in
  // radians, it turns at position pos. theta = pos * freq_scale *
  // base^(-2i/rope_dims) / factor_i (YaRN mixes the unscaled angle back in),
  // computed in float by repeated multiplication exactly as llama.cpp does:
  // the keys are rounded to float16 in the cache, and matching its rounding
  // of theta keeps those roundings identical, where a more precise theta
  // would flip a few of them and make the logits drift from the reference
  // by ~0.05 rms.
  template <typename Visit>
  void for_each_angle(int pos, Visit visit) const {
    float theta_base = static_cast<float>(pos);
    for (int i = 0; i < pairs_; ++i) {
      const float theta_unscaled = freq_factors_.empty() ? theta_base : theta_base / freq_factors_[i];
      float theta = freq_scale_ * theta_unscaled;
      if (!yarn_mix_.empty()) theta = theta * (1 - yarn_mix_[i]) + theta_unscaled * yarn_mix_[i];
      visit(i, still_.empty() || !still_[i] ? theta : 0.0f);
      theta_base *= theta_scale_;
    }
  }

  // Rotates the leading rope_dims values of one head, in the model's layout:
  // adjacent pairs (x[2i], x[2i+1]) or NeoX halves (x[i], x[i + pairs]).
  void apply(float* head, int pos) const;
  // The rotation back: by -theta, times the same magnitude (ggml's rope
  // backward), for values that were rotated on their way in (deepseek4's
  // attention output, a weighted sum of rotated keys).
  void unapply(float* head, int pos) const;

  // What cos and sin are multiplied by: YaRN's magnitude gain times the
  // file's attn_factor (1 without YaRN).
  float magnitude() const { return magnitude_; }

 private:
  void rotate(float* head, int pos, float direction) const;

  int pairs_ = 0;
  bool neox_ = false;
  float freq_scale_ = 1.0f;
  float theta_scale_ = 1.0f;       // base^(-2/rope_dims): theta shrinks by this per pair
  float magnitude_ = 1.0f;
  std::vector<float> freq_factors_;
  std::vector<float> yarn_mix_;    // YaRN: per pair, the share of the unscaled theta
  // M-RoPE (qwen35): the pairs of the fourth section, which a text token
  // turns by position 0, i.e. not at all; empty for other models.
  std::vector<bool> still_;
};

}  // namespace revis
