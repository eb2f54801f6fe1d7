// Special-token partitioning (see special_tokens.h).
#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace revis::tok {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool overlaps(std::span<const TextSpan> spans, size_t begin, size_t end) {
  for (const TextSpan& s : spans)
    if (begin < s.end && s.begin < end) return true;
  return false;
}

}  // namespace

SpecialTokens::SpecialTokens(const Vocab& vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if ((vocab.attr[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) &&
        !vocab.text[id].empty()) {
      ids_.push_back(id);
    }
  }
  std::stable_sort(ids_.begin(), ids_.end(), [&](int32_t a, int32_t b) {
    return vocab.text[a].size() > vocab.text[b].size();
  });
}

void SpecialTokens::partition(const Vocab& vocab, std::string_view text, bool parse_special,
                              std::span<const TextSpan> literal, std::vector<Fragment>& out) const {
  out.clear();
  if (text.empty()) return;
  out.push_back({-1, 0, text.size()});

  std::vector<Fragment> next;
  for (int32_t id : ids_) {
    const uint32_t attr = vocab.attr[id];
    const bool control = attr & (kAttrControl | kAttrUnknown);
    if (!parse_special && control) continue;
    const std::string& needle = vocab.text[id];
    // Most candidates do not occur at all: one scan of the whole text
    // rejects them without touching the fragment list.
    if (text.find(needle) == std::string_view::npos) continue;

    next.clear();
    next.reserve(out.size() + 2);
    for (const Fragment& f : out) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.begin;
      const size_t end = f.end;
      size_t search = begin;
      while (begin < end) {
        const size_t m = text.substr(0, end).find(needle, search);
        if (m == std::string_view::npos) {
          next.push_back({-1, begin, end});
          break;
        }
        if (control && overlaps(literal, m, m + needle.size())) {
          search = m + 1;  // plain text here; look further on
          continue;
        }
        size_t left_end = m;
        if (attr & kAttrLstrip) {
          while (left_end > begin && is_ascii_space(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) next.push_back({-1, begin, left_end});
        next.push_back({id, m, m + needle.size()});
        begin = m + needle.size();
        if (attr & kAttrRstrip) {
          while (begin < end && is_ascii_space(text[begin])) ++begin;
        }
        search = begin;
      }
    }
    out.swap(next);
  }
}

}  // namespace revis::tok
