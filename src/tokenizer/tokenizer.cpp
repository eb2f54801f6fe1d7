// Tokenizer: encoding (special-token split, then SPM or pre-tokenizer + BPE)
// and the per-token queries.
#include "tokenizer/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace revis {
namespace {

// `text` with every ' ' spelled `space`.
std::string replace_spaces(std::string_view text, std::string_view space) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == ' ') {
      out += space;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special,
                                       bool add_eos) const {
  std::vector<tok::Fragment> fragments;
  impl_->specials.partition(impl_->vocab, text, parse_special, {}, fragments);
  return encode_fragments(text, fragments, add_bos, add_eos);
}

std::vector<int32_t> Tokenizer::encode_template(std::string_view text, bool add_bos,
                                                std::span<const TextSpan> literal) const {
  std::vector<tok::Fragment> fragments;
  impl_->specials.partition(impl_->vocab, text, true, literal, fragments);
  return encode_fragments(text, fragments, add_bos, false);
}

std::vector<int32_t> Tokenizer::encode_fragments(std::string_view text, std::span<const tok::Fragment> fragments,
                                                 bool add_bos, bool add_eos) const {
  const Impl& t = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_bos && t.bos >= 0) out.push_back(t.bos);

  static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
  if (t.type == Type::kSpm) {
    // The input's start counts as "after a special token": it gets the
    // space prefix too.
    bool after_special = true;
    std::string escaped;
    for (const tok::Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      escaped.clear();
      if (t.add_space_prefix && after_special) escaped += kSpace;
      escaped += replace_spaces(text.substr(f.begin, f.end - f.begin), kSpace);
      t.spm->tokenize(t.vocab, escaped, out);
      after_special = false;
    }
  } else {
    std::vector<std::string_view> words;
    for (const tok::Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
        continue;
      }
      // Invalid UTF-8 becomes U+FFFD before splitting, as in llama.cpp; the
      // regexes then run on valid text only.
      std::string clean = tok::sanitize(text.substr(f.begin, f.end - f.begin));
      const bool spm_spelling = t.pre->spm_spelling();
      if (spm_spelling) clean = replace_spaces(clean, kSpace);
      words.clear();
      t.pre->split(clean, words);
      for (std::string_view w : words) {
        if (spm_spelling) {
          t.bpe->tokenize_spm_spelled_word(t.vocab, w, out);
        } else {
          t.bpe->tokenize_word(t.vocab, w, t.pre->ignore_merges(), t.unk, out);
        }
      }
    }
  }

  if (add_eos && t.eos >= 0) out.push_back(t.eos);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Impl& t = *impl_;
  if (!t.vocab.valid(id)) return {};
  if (!render_special && (t.vocab.attr[id] & (tok::kAttrControl | tok::kAttrUnknown))) return {};
  return t.pieces[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id, render_special);
  return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.size(); }
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
int32_t Tokenizer::eot() const { return impl_->eot; }
bool Tokenizer::add_bos_default() const { return impl_->add_bos; }
bool Tokenizer::add_eos_default() const { return impl_->add_eos; }
bool Tokenizer::add_space_prefix() const {
  return impl_->type == Type::kSpm && impl_->add_space_prefix;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return impl_->vocab.valid(id) && impl_->eog[id];
}

bool Tokenizer::is_control(int32_t id) const {
  return impl_->vocab.has(id, tok::kAttrControl | tok::kAttrUnknown);
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = impl_->vocab.find(text);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string empty;
  return impl_->vocab.valid(id) ? impl_->vocab.text[id] : empty;
}

Tokenizer::Type Tokenizer::type() const { return impl_->type; }
const std::string& Tokenizer::pre_tokenizer() const { return impl_->pre_name; }
const std::vector<std::string>& Tokenizer::warnings() const { return impl_->warnings; }

}  // namespace revis
