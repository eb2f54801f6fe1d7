// Hyper-connections (deepseek4): the residual stream is n_hc copies of the
// hidden state. Before attention and before the FFN a block mixes the
// copies into the one input it reads, and afterwards writes its output back
// into every copy while mixing the copies among themselves. The weights of
// both mixes depend on the token: they come from logits (weights.h's
// HyperMix fn applied to the normalised copies), shaped by the file's
// scale and base:
//   read   pre[h]  = sigmoid(scale[0] logit[h] + base[h]) + eps
//   write  post[h] = 2 sigmoid(scale[1] logit[n_hc + h] + base[n_hc + h])
//   carry  comb    = Sinkhorn(scale[2] logit[2 n_hc + ..] + base[2 n_hc + ..]),
// an n_hc x n_hc matrix pushed towards doubly stochastic (rows and columns
// summing to one) so the carried copies neither grow nor fade.
// Plain functions over one token's values.
#pragma once

#include "model/weights.h"

namespace revis {

// x / sqrt(mean(x^2) + eps), no weight: the copies before the mix logits.
void rms_normalise(float* out, const float* x, int n, float eps);

// From one token's 2 n_hc + n_hc^2 mix logits: pre and post (n_hc each) and
// comb (n_hc^2, comb[dst + n_hc * src]: how much of copy src goes into copy
// dst), Sinkhorn taking `iterations` rounds.
void hyper_weights(const float* logits, const HyperMix& m, int n_hc, float eps, int iterations, float* pre,
                   float* post, float* comb);

// The read weights of the output head's mix, from its n_hc logits.
void hyper_head_weights(const float* logits, const HyperMix& m, int n_hc, float eps, float* pre);

// out = sum over h of pre[h] * copies[h] (n_hc copies of n values).
void hyper_read(const float* copies, const float* pre, int n_hc, int n, float* out);

// out[dst] = post[dst] * x + sum over src of comb[dst + n_hc * src] * copies[src].
void hyper_write(const float* x, const float* copies, const float* post, const float* comb, int n_hc, int n,
                 float* out);

}  // namespace revis
