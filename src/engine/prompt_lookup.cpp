// Prompt lookup (revis/draft.h): drafts copied from earlier in the context.
//
// The longest suffix n-gram (max_ngram .. 1 tokens) that occurred before is
// found at its latest earlier occurrence, and the draft copies what followed
// it. The copy reads from the context followed by the draft itself, as LZ77
// copies overlap: draft[i] = (context ++ draft)[at + n + i]. Text that has
// become periodic (a loop, a repeated list) matches one period back, and a
// copy cut at the end of the context would then draft at most one period;
// reading on into the draft keeps following the period up to `max` tokens.
//
// Cost per draft: a backward scan of the context for each n-gram length
// tried, O(context x max_ngram) in the worst case (no match at all), a few
// microseconds for thousands of tokens, plus O(max) for the copy.
#include <algorithm>

#include "revis/draft.h"

namespace revis {
namespace {

class PromptLookup final : public Drafter {
 public:
  explicit PromptLookup(int max_ngram) : max_ngram_(max_ngram) {}

  std::unique_ptr<Drafter> another() const override { return std::make_unique<PromptLookup>(max_ngram_); }

  Result<std::vector<int32_t>> draft(std::span<const int32_t> context, int max) override {
    const int size = static_cast<int>(context.size());
    std::vector<int32_t> out;
    for (int n = std::min(max_ngram_, size - 1); n >= 1; --n) {
      const auto suffix = context.subspan(size - n);
      // The latest earlier occurrence: the most recent text is the likeliest to repeat.
      for (int at = size - n - 1; at >= 0; --at) {
        if (!std::equal(suffix.begin(), suffix.end(), context.begin() + at)) continue;
        out.reserve(static_cast<size_t>(std::max(max, 0)));
        // at + n < size, so each position read is in the context or a token
        // already drafted.
        for (int i = 0, from = at + n; i < max; ++i, ++from)
          out.push_back(from < size ? context[from] : out[from - size]);
        return out;
      }
    }
    return out;
  }

 private:
  int max_ngram_;
};

}  // namespace

std::unique_ptr<Drafter> prompt_lookup_drafter(int max_ngram) {
  return std::make_unique<PromptLookup>(std::max(1, max_ngram));
}

}  // namespace revis
