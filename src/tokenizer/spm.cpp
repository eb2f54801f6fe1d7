// SentencePiece-style BPE merging (see spm.h).
#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdio>
#include <queue>
#include <string>

#include "tokenizer/utf8.h"

namespace revis::tok {

SpmModel::SpmModel(const Vocab& vocab, int32_t unk) : unk_(unk) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    int32_t id = vocab.find(hex);
    if (id < 0) id = vocab.find(std::string(1, static_cast<char>(b)));
    byte_token_[b] = id;
  }
}

namespace {

struct Symbol {
  size_t begin;  // byte offset in the text
  uint32_t n;    // bytes covered; 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;  // bytes of left + right when queued
};

// Highest score first; among equal scores the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void SpmModel::tokenize(const Vocab& vocab, std::string_view text,
                        std::vector<int32_t>& out) const {
  if (text.empty()) return;

  // Symbol lengths come from the lead byte alone, without validation, which
  // is what llama.cpp does (it matters only for malformed UTF-8).
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(lead_byte_length(static_cast<uint8_t>(text[off])), text.size() - off);
    const int32_t index = static_cast<int32_t>(sym.size());
    off += n;
    sym.push_back(
        Symbol{off - n, static_cast<uint32_t>(n), index - 1, off == text.size() ? -1 : index + 1});
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = sym[left].n + sym[right].n;
    const int32_t id = vocab.find(text.substr(sym[left].begin, size));
    if (id < 0) return;
    queue.push(Bigram{vocab.score[id], left, right, size});
  };
  for (size_t i = 1; i < sym.size(); ++i)
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& a = sym[bg.left];
    Symbol& b = sym[bg.right];
    if (a.n == 0 || b.n == 0 || a.n + b.n != bg.size) continue;  // stale
    a.n += b.n;
    b.n = 0;
    a.next = b.next;
    if (b.next >= 0) sym[b.next].prev = bg.left;
    try_add(a.prev, bg.left);
    try_add(bg.left, a.next);
  }

  // A merged symbol is always a token (only token-forming pairs merge), so
  // only single characters can miss the vocabulary.
  for (int32_t i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].begin, sym[i].n);
    const int32_t id = vocab.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t byte_id = byte_token_[static_cast<uint8_t>(c)];
      if (byte_id >= 0) {
        out.push_back(byte_id);
      } else if (unk_ >= 0) {
        out.push_back(unk_);
      }
    }
  }
}

}  // namespace revis::tok
