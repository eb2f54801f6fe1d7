// libFuzzer target for the tokenizers.
//
// Loads several vocabularies once (REVIS_FUZZ_VOCAB: one path or a
// ':'-separated list; by default the vocab test files and two model files
// under ../shared/testdata, covering SPM and the gpt-2, llama-bpe, qwen2,
// deepseek-llm and deepseek-coder pre-tokenizers, and this repository's
// Gemma 4 style vocabulary). Each input's first byte
// picks a vocabulary and the flags; the rest is the text. Checks:
//  - encode never crashes and yields only ids inside the vocabulary;
//  - BPE: decode(encode(text)) == text for valid UTF-8 (control tokens
//    rendered, so parse_special may be on); in Gemma 4's SentencePiece
//    spelling only for text without U+2581, which decodes as a space;
//  - SPM: decode(encode(text)) == " " + text for valid UTF-8 when no special
//    tokens are parsed and the text has no U+2581 (which decodes as a space).
//    Not for malformed UTF-8: like llama.cpp, a symbol's length comes from
//    its lead byte, so a stray lead byte can swallow an escaped space, which
//    then falls back to the bytes of "▁";
//  - the streaming detokenizer only ever emits valid UTF-8.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Vocab {
  std::string path;
  std::unique_ptr<revis::gguf::GgufFile> file;
  std::unique_ptr<revis::Tokenizer> tok;
};

std::vector<Vocab>& vocabs() {
  static std::vector<Vocab> list = [] {
    std::vector<std::string> paths;
    if (const char* env = std::getenv("REVIS_FUZZ_VOCAB"); env && *env) {
      std::string s(env);
      size_t pos = 0;
      while (pos <= s.size()) {
        const size_t end = s.find(':', pos);
        const std::string p =
            s.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        if (!p.empty()) paths.push_back(p);
        if (end == std::string::npos) break;
        pos = end + 1;
      }
    } else {
      const std::string dir = "../shared/testdata/";
      for (const char* v : {"gpt-2", "llama-spm", "deepseek-llm", "deepseek-coder", "phi-3"}) {
        paths.push_back(dir + "vocab/ggml-vocab-" + v + ".gguf");
      }
      paths.push_back(dir + "models/llama-bpe-F16.gguf");
      paths.push_back(dir + "models/qwen2-F16.gguf");
      paths.push_back("tests/testdata/gemma4-vocab/ggml-vocab-gemma4.gguf");
    }
    std::vector<Vocab> out;
    for (const std::string& p : paths) {
      auto file = revis::gguf::GgufFile::open(p);
      if (!file.ok()) {
        std::fprintf(stderr, "fuzz_tokenizer: skipping %s: %s\n", p.c_str(),
                     file.status().message().c_str());
        continue;
      }
      auto tok = revis::Tokenizer::from_gguf(*file.value());
      if (!tok.ok()) {
        std::fprintf(stderr, "fuzz_tokenizer: %s\n", tok.status().message().c_str());
        std::abort();  // the test vocabularies must load
      }
      out.push_back({p, std::move(file.value()), std::move(tok.value())});
    }
    if (out.empty()) {
      std::fprintf(stderr,
                   "fuzz_tokenizer: no vocabulary loaded; set REVIS_FUZZ_VOCAB or run from a "
                   "directory next to shared/testdata\n");
      std::abort();
    }
    return out;
  }();
  return list;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    int trail;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b0 < 0x80) {
      ++i;
      continue;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      trail = 1;
    } else if (b0 == 0xE0) {
      trail = 2, lo = 0xA0;
    } else if (b0 == 0xED) {
      trail = 2, hi = 0x9F;
    } else if (b0 >= 0xE1 && b0 <= 0xEF) {
      trail = 2;
    } else if (b0 == 0xF0) {
      trail = 3, lo = 0x90;
    } else if (b0 >= 0xF1 && b0 <= 0xF3) {
      trail = 3;
    } else if (b0 == 0xF4) {
      trail = 3, hi = 0x8F;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(trail) >= s.size()) return false;
    for (int k = 1; k <= trail; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return false;
    }
    i += static_cast<size_t>(trail) + 1;
  }
  return true;
}

[[noreturn]] void fail(const Vocab& v, const char* what, std::string_view text) {
  std::fprintf(stderr, "fuzz_tokenizer: %s (%s), text of %zu bytes\n", what, v.path.c_str(),
               text.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto& list = vocabs();
  const uint8_t selector = data[0];
  const Vocab& v = list[selector % list.size()];
  const bool parse_special = (selector >> 4) & 1;
  const bool add_bos = (selector >> 5) & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const revis::Tokenizer& tok = *v.tok;

  const std::vector<int32_t> ids = tok.encode(text, add_bos, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) fail(v, "id out of range", text);
  }

  const std::string decoded = tok.decode(ids, /*render_special=*/true);
  const std::string bos_piece =
      add_bos && tok.bos() >= 0 ? tok.token_to_piece(tok.bos(), true) : "";
  if (tok.type() == revis::Tokenizer::Type::kBpe) {
    const bool spm_spelled_space =
        tok.pre_tokenizer() == "gemma4" && text.find("\xE2\x96\x81") != std::string_view::npos;
    if (valid_utf8(text) && !spm_spelled_space && decoded != bos_piece + std::string(text)) {
      fail(v, "BPE round trip differs", text);
    }
  } else if (!parse_special && !text.empty() && valid_utf8(text) &&
             text.find("\xE2\x96\x81") == std::string_view::npos && tok.add_space_prefix()) {
    // Only where no special-token text can be matched: user-defined tokens
    // are always matched and may strip whitespace (Phi-3).
    bool has_special_text = false;
    for (const char* s : {"<", "["}) has_special_text |= text.find(s) != std::string_view::npos;
    if (!has_special_text && decoded != bos_piece + " " + std::string(text)) {
      fail(v, "SPM round trip differs", text);
    }
  }

  revis::Detokenizer detok(tok, parse_special);
  for (int32_t id : ids) {
    if (!valid_utf8(detok.push(id))) fail(v, "detokenizer emitted invalid UTF-8", text);
  }
  if (!valid_utf8(detok.flush())) fail(v, "detokenizer flush emitted invalid UTF-8", text);

  (void)tok.token_to_piece(static_cast<int32_t>(size) * 7919 % (tok.n_vocab() + 10) - 5);
  (void)tok.is_end_of_generation(static_cast<int32_t>(size) - 3);
  return 0;
}
