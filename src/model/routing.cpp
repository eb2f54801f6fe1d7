#include "model/routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/ops.h"

namespace revis {

// The gate gives each expert a probability: a softmax over the router's
// logits, or a sigmoid of each; gpt-oss keeps the logits plus its router bias. The
// choice takes the top k of probability plus the expert's bias (DeepSeek
// V3's exp_probs_b, which balances the load), among the experts of the best
// groups where experts are grouped (a group scores the sum of its best two).
// The weights are the chosen probabilities (gpt-oss: a softmax over the k
// chosen logits), normalised to sum to one where the model says so, then
// scaled.
void choose_experts(const ModelConfig& c, const LayerWeights& l, float* logits, int n, ExpertRows& routed) {
  const int n_exp = c.n_expert, k = c.n_expert_used;
  std::vector<float> choice(n_exp), chosen(k);
  routed.assign(n_exp, {});
  std::vector<int> order(n_exp);
  auto best_first = [](const float* score) {
    return [score](int a, int b) { return score[a] > score[b] || (score[a] == score[b] && a < b); };
  };
  const bool grouped = c.n_expert_groups > 1 && c.n_expert_groups_used < c.n_expert_groups;
  for (int t = 0; t < n; ++t) {
    float* p = &logits[t * n_exp];
    if (!l.router_bias.empty()) add(p, l.router_bias.data(), n_exp);
    if (c.expert_gating == ExpertGating::kSoftmax)
      softmax(p, n_exp);
    else if (c.expert_gating == ExpertGating::kSigmoid)
      for (int e = 0; e < n_exp; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
    for (int e = 0; e < n_exp; ++e) choice[e] = l.expert_bias.empty() ? p[e] : p[e] + l.expert_bias[e];
    if (grouped) {
      const int per_group = n_exp / c.n_expert_groups;
      std::vector<float> group_score(c.n_expert_groups);
      std::vector<int> groups(c.n_expert_groups);
      for (int g = 0; g < c.n_expert_groups; ++g) {
        std::vector<float> members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
        std::partial_sort(members.begin(), members.begin() + std::min(2, per_group), members.end(), std::greater<>());
        group_score[g] = members[0] + (per_group > 1 ? members[1] : 0.0f);
      }
      std::iota(groups.begin(), groups.end(), 0);
      std::partial_sort(groups.begin(), groups.begin() + c.n_expert_groups_used, groups.end(),
                        best_first(group_score.data()));
      for (int j = c.n_expert_groups_used; j < c.n_expert_groups; ++j)
        std::fill_n(choice.begin() + groups[j] * per_group, per_group, -INFINITY);
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), best_first(choice.data()));
    if (c.expert_gating == ExpertGating::kSoftmaxOfChosen) {
      for (int j = 0; j < k; ++j) chosen[j] = p[order[j]];
      softmax(chosen.data(), k);
      for (int j = 0; j < k; ++j) p[order[j]] = chosen[j];
    }
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += p[order[j]];
    for (int j = 0; j < k; ++j) {
      const float w = c.expert_weights_norm ? p[order[j]] / sum : p[order[j]];
      routed[order[j]].push_back({t, w * c.expert_weights_scale});
    }
  }
}

}  // namespace revis
