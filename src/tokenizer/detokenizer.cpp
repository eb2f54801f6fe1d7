// Detokenizer: joins token pieces into whole UTF-8 characters (see
// tokenizer.h).
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace revis {

Detokenizer::Detokenizer(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(&tokenizer), render_special_(render_special) {}

std::string Detokenizer::push(int32_t id, bool render) {
  pending_ += tokenizer_->token_to_piece(id, render_special_ || render);
  return take(false);
}

std::string Detokenizer::flush() { return take(true); }

std::string Detokenizer::take(bool at_end) {
  std::string out;
  const auto* p = reinterpret_cast<const uint8_t*>(pending_.data());
  const size_t n = pending_.size();
  size_t i = 0;
  while (i < n) {
    const int r = tok::check_sequence(p + i, n - i);
    if (r > 0) {
      out.append(pending_, i, static_cast<size_t>(r));
      i += static_cast<size_t>(r);
    } else if (r < 0) {
      out += tok::kReplacementChar;  // one per maximal ill-formed subpart
      i += static_cast<size_t>(-r);
    } else if (at_end) {
      out += tok::kReplacementChar;  // an unfinished character at the very end
      i = n;
    } else {
      break;  // wait for the rest of this character
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace revis
