// Prompt lookup (revis/draft.h): drafts copied from earlier in the context.
//
// Cost per draft: a backward scan of the context for each n-gram length
// tried, O(context x max_ngram) in the worst case (no match at all), a few
// microseconds for thousands of tokens.
#include <algorithm>

#include "revis/draft.h"

namespace revis {
namespace {

class PromptLookup final : public Drafter {
 public:
  explicit PromptLookup(int max_ngram) : max_ngram_(max_ngram) {}

  Result<std::vector<int32_t>> draft(std::span<const int32_t> context, int max) override {
    const int size = static_cast<int>(context.size());
    for (int n = std::min(max_ngram_, size - 1); n >= 1; --n) {
      const auto suffix = context.subspan(size - n);
      // The latest earlier occurrence: the most recent text is the likeliest to repeat.
      for (int at = size - n - 1; at >= 0; --at) {
        if (!std::equal(suffix.begin(), suffix.end(), context.begin() + at)) continue;
        const int follow = std::min(max, size - (at + n));
        return std::vector<int32_t>(context.begin() + at + n, context.begin() + at + n + follow);
      }
    }
    return std::vector<int32_t>{};
  }

 private:
  int max_ngram_;
};

}  // namespace

std::unique_ptr<Drafter> prompt_lookup_drafter(int max_ngram) {
  return std::make_unique<PromptLookup>(std::max(1, max_ngram));
}

}  // namespace revis
