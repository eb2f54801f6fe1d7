// Byte-level BPE merging (see bpe.h).
#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/utf8.h"

namespace revis::tok {

Result<BpeModel> BpeModel::create(const Vocab& vocab, const std::vector<std::string>& merges) {
  BpeModel model;
  for (int b = 0; b < 256; ++b) {
    model.byte_token_[b] = vocab.find(byte_to_unicode(static_cast<uint8_t>(b)));
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    model.byte_fallback_[b] = vocab.find(name);
  }

  model.merges_.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& line = merges[i];
    auto fail = [&](const std::string& why) {
      return Status::error("tokenizer.ggml.merges[" + std::to_string(i) + "] '" + line +
                           "': " + why);
    };
    // The separator is the first space after the first byte, so a merge of
    // a token that is itself a space (non-byte-level vocabularies) works.
    const size_t sp = line.size() > 1 ? line.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos) return fail("expected two tokens separated by a space");
    const std::string_view left(line.data(), sp);
    const std::string_view right(line.data() + sp + 1, line.size() - sp - 1);
    const int32_t l = vocab.find(left);
    const int32_t r = vocab.find(right);
    if (l < 0) return fail(std::string(left).append(" is not a token"));
    if (r < 0) return fail(std::string(right).append(" is not a token"));
    joined.assign(left);
    joined.append(right);
    const int32_t result = vocab.find(joined);
    if (result < 0) return fail("the merged text '" + joined + "' is not a token");
    model.merges_.try_emplace(key(l, r), Merge{static_cast<int32_t>(i), result});
  }
  return model;
}

namespace {

struct Bigram {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t result;
  uint32_t size;  // bytes of left + right when queued
};

// Lowest rank first; among equal ranks the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void BpeModel::merge(std::vector<Symbol>& sym) const {
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& a = sym[left];
    const Symbol& b = sym[right];
    if (a.id < 0 || b.id < 0) return;
    auto it = merges_.find(key(a.id, b.id));
    if (it == merges_.end()) return;
    queue.push(Bigram{it->second.rank, left, right, it->second.result, a.n + b.n});
  };
  for (size_t i = 1; i < sym.size(); ++i)
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& a = sym[bg.left];
    Symbol& b = sym[bg.right];
    // Stale entry: one side was merged away or grew since it was queued.
    if (a.n == 0 || b.n == 0 || a.n + b.n != bg.size) continue;
    a.id = bg.result;
    a.n += b.n;
    b.n = 0;
    a.next = b.next;
    if (b.next >= 0) sym[b.next].prev = bg.left;
    try_add(a.prev, bg.left);
    try_add(bg.left, a.next);
  }
}

void BpeModel::tokenize_word(const Vocab& vocab, std::string_view word, bool ignore_merges,
                             int32_t unk, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    const int32_t whole = vocab.find(bytes_to_unicode_text(word));
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }

  std::vector<Symbol> sym(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    sym[i] = Symbol{byte_token_[static_cast<uint8_t>(word[i])], static_cast<int32_t>(i) - 1,
                    i + 1 < word.size() ? static_cast<int32_t>(i + 1) : -1, static_cast<uint32_t>(i), 1};
  }
  merge(sym);
  for (int32_t i = 0; i != -1; i = sym[i].next) {
    if (sym[i].id >= 0) {
      out.push_back(sym[i].id);
    } else if (unk >= 0) {
      out.push_back(unk);
    }
  }
}

void BpeModel::tokenize_spm_spelled_word(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  // A run of newlines is looked up whole: Gemma 4's vocabulary has tokens
  // for them that no merge reaches (llama.cpp does the same).
  if (word.find_first_not_of('\n') == std::string_view::npos) {
    const int32_t whole = vocab.find(word);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }

  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(word.size() - i, static_cast<size_t>(lead_byte_length(static_cast<uint8_t>(word[i]))));
    const int32_t index = static_cast<int32_t>(sym.size());
    sym.push_back(Symbol{vocab.find(word.substr(i, n)), index - 1, i + n < word.size() ? index + 1 : -1,
                         static_cast<uint32_t>(i), static_cast<uint32_t>(n)});
    i += n;
  }
  merge(sym);
  for (int32_t i = 0; i != -1; i = sym[i].next) {
    if (sym[i].id >= 0) {
      out.push_back(sym[i].id);
      continue;
    }
    for (uint32_t k = 0; k < sym[i].n; ++k) {
      const int32_t byte = byte_fallback_[static_cast<uint8_t>(word[sym[i].begin + k])];
      if (byte >= 0) out.push_back(byte);
    }
  }
}

}  // namespace revis::tok
