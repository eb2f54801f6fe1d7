// Expert routing of a mixture-of-experts layer: from the router's logits
// to each expert's tokens and weights. Shared by the CPU's forward pass and
// the GPU's (device_layers.h), which computes the logits on the device and
// chooses here, so that both route alike.
#pragma once

#include <utility>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace revis {

// expert -> (row of the chunk, weight), for every expert of the layer.
using ExpertRows = std::vector<std::vector<std::pair<int, float>>>;

// Chooses the top n_expert_used experts of each of n rows of router logits
// (n_expert values each, turned into probabilities in place) and their
// weights, as the layer's gating asks (config.h's ExpertGating, the
// expert bias and groups).
void choose_experts(const ModelConfig& c, const LayerWeights& l, float* logits, int n, ExpertRows& routed);

}  // namespace revis
