// gemma4_vocab: a Gemma 4 style vocabulary built from a real byte-level BPE
// vocabulary, and llama.cpp's token ids for test strings on it. A tool
// linked against a llama.cpp build (gemma4_vocab.sh), not part of revis.
//
//   gemma4_vocab SRC.gguf CASES.inp OUT_STEM
// writes OUT_STEM.gguf and OUT_STEM.gguf.out.
//
// Gemma 4's converter writes tokenizer.ggml.model "gemma4" and no
// tokenizer.ggml.pre: tokens are raw UTF-8 with U+2581 for a space, and
// bytes without a token of their own fall back to <0xNN> tokens. SRC's
// tokens and merges are spelled that way here: each byte stand-in
// character back to its byte, ' ' to U+2581; texts that are not valid UTF-8
// (pieces of a character) are dropped, with the merges that use them, and
// the 256 byte tokens are appended. CASES holds strings separated by
// "\n__ggml_vocab_test__\n"; each line of the .out file is one string's ids,
// tokenized without BOS and without parsing special tokens.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gguf.h"
#include "llama.h"

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "gemma4_vocab: %s\n", what.c_str());
  std::exit(1);
}

// GPT-2's byte stand-ins: printable Latin-1 bytes stand for themselves, the
// others for U+0100 upwards in byte order.
std::map<uint32_t, uint8_t> stand_in_to_byte() {
  std::map<uint32_t, uint8_t> map;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    map[printable ? b : next++] = static_cast<uint8_t>(b);
  }
  return map;
}

// Decodes UTF-8 `s` into code points; false when it is not valid UTF-8.
bool code_points(const std::string& s, std::vector<uint32_t>& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc >> 6) != 2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    out.push_back(cp);
    i += n;
  }
  return true;
}

// A byte-level token's text in Gemma 4's spelling; false when its bytes are
// not valid UTF-8.
bool respell(const std::string& text, const std::map<uint32_t, uint8_t>& bytes, std::string& out) {
  std::vector<uint32_t> cps;
  if (!code_points(text, cps)) die("source token is not UTF-8: " + text);
  std::string raw;
  for (uint32_t cp : cps) {
    auto it = bytes.find(cp);
    if (it == bytes.end()) return false;  // not a byte-level spelling
    raw.push_back(static_cast<char>(it->second));
  }
  std::vector<uint32_t> check;
  if (!code_points(raw, check)) return false;
  out.clear();
  for (char c : raw) out += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
  return true;
}

void write_vocab(const char* src_path, const std::string& out_path) {
  gguf_init_params params{true, nullptr};
  gguf_context* src = gguf_init_from_file(src_path, params);
  if (!src) die(std::string("cannot read ") + src_path);
  const int64_t tokens_key = gguf_find_key(src, "tokenizer.ggml.tokens");
  const int64_t types_key = gguf_find_key(src, "tokenizer.ggml.token_type");
  const int64_t merges_key = gguf_find_key(src, "tokenizer.ggml.merges");
  if (tokens_key < 0 || types_key < 0 || merges_key < 0) die("source lacks tokens, token_type or merges");
  const auto* src_types = static_cast<const int32_t*>(gguf_get_arr_data(src, types_key));

  const auto bytes = stand_in_to_byte();
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::map<std::string, int32_t> ids;
  std::map<std::string, std::string> spelled;  // source text -> new text
  for (size_t i = 0; i < gguf_get_arr_n(src, tokens_key); ++i) {
    const std::string text = gguf_get_arr_str(src, tokens_key, i);
    std::string out;
    // Control tokens (<|endoftext|>) keep their text.
    if (src_types[i] == 3) out = text;
    else if (!respell(text, bytes, out)) continue;
    if (!ids.emplace(out, static_cast<int32_t>(tokens.size())).second) continue;
    spelled[text] = out;
    tokens.push_back(out);
    types.push_back(src_types[i]);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (!ids.emplace(name, static_cast<int32_t>(tokens.size())).second) die(std::string("duplicate ") + name);
    tokens.push_back(name);
    types.push_back(6);  // byte
  }
  std::vector<std::string> merges;
  for (size_t i = 0; i < gguf_get_arr_n(src, merges_key); ++i) {
    const std::string line = gguf_get_arr_str(src, merges_key, i);
    const size_t sp = line.find(' ', 1);
    auto left = spelled.find(line.substr(0, sp)), right = spelled.find(line.substr(sp + 1));
    if (left == spelled.end() || right == spelled.end()) continue;
    if (!ids.count(left->second + right->second)) continue;
    merges.push_back(left->second + " " + right->second);
  }

  gguf_context* out = gguf_init_empty();
  gguf_set_val_str(out, "general.architecture", "gpt2");
  gguf_set_val_str(out, "general.name", "gemma4-style gpt-2 vocabulary");
  gguf_set_val_u32(out, "gpt2.block_count", 1);
  gguf_set_val_u32(out, "gpt2.context_length", 1024);
  gguf_set_val_u32(out, "gpt2.embedding_length", 64);
  gguf_set_val_u32(out, "gpt2.feed_forward_length", 256);
  gguf_set_val_u32(out, "gpt2.attention.head_count", 1);
  gguf_set_val_f32(out, "gpt2.attention.layer_norm_epsilon", 1e-5f);
  gguf_set_val_str(out, "tokenizer.ggml.model", "gemma4");
  std::vector<const char*> ptrs;
  for (const auto& t : tokens) ptrs.push_back(t.c_str());
  gguf_set_arr_str(out, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
  gguf_set_arr_data(out, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
  ptrs.clear();
  for (const auto& m : merges) ptrs.push_back(m.c_str());
  gguf_set_arr_str(out, "tokenizer.ggml.merges", ptrs.data(), ptrs.size());
  const auto eot = ids.find("<|endoftext|>");
  if (eot == ids.end()) die("source lacks <|endoftext|>");
  gguf_set_val_u32(out, "tokenizer.ggml.bos_token_id", eot->second);
  gguf_set_val_u32(out, "tokenizer.ggml.eos_token_id", eot->second);
  if (!gguf_write_to_file(out, out_path.c_str(), true)) die("cannot write " + out_path);
  std::fprintf(stderr, "%s: %zu tokens, %zu merges\n", out_path.c_str(), tokens.size(), merges.size());
  gguf_free(out);
  gguf_free(src);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) die("usage: gemma4_vocab SRC.gguf CASES.inp OUT_STEM");
  const std::string stem = argv[3];
  write_vocab(argv[1], stem + ".gguf");

  std::ifstream in(argv[2], std::ios::binary);
  if (!in) die(std::string("cannot read ") + argv[2]);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str(), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  for (size_t pos = 0;;) {
    const size_t next = all.find(sep, pos);
    cases.push_back(all.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + sep.size();
  }

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file((stem + ".gguf").c_str(), mp);
  if (!model) die("llama.cpp cannot load " + stem + ".gguf");
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::ofstream out(stem + ".gguf.out", std::ios::binary);
  for (const std::string& text : cases) {
    std::vector<llama_token> ids(text.size() * 4 + 8);
    const int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                                 static_cast<int32_t>(ids.size()), false, false);
    if (n < 0) die("tokenize failed");
    for (int i = 0; i < n; ++i) out << (i ? " " : "") << ids[i];
    out << "\n";
  }
  llama_model_free(model);
  return 0;
}
