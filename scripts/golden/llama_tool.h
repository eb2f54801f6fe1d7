// What the golden tools (llama_golden.cpp, llama_mtp_golden.cpp) share:
// failing with a message, the JSON they write, and the llama.cpp context
// settings of the shared test data (2 threads, KV cache F16, flash
// attention off). Tools linked against a llama.cpp build, not part of revis.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace golden {

[[noreturn]] inline void die(const char* tool, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", tool, what.c_str());
  std::exit(1);
}

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

inline std::string json_ints(const std::vector<llama_token>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// The whole of a file (a prompt), as bytes.
inline std::string read_text(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// A model on the CPU, its MTP layers loaded where `mtp`; dies when it cannot.
inline llama_model* load_model(const char* tool, const std::string& path, bool mtp = false) {
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mtp = mtp;
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (!model) die(tool, "cannot load " + path);
  return model;
}

inline llama_context_params context_params() {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_batch = 1024;
  cp.n_ubatch = 512;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  cp.type_k = GGML_TYPE_F16;
  cp.type_v = GGML_TYPE_F16;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  return cp;
}

// Sets row i of `batch` to `token` at position `pos` of sequence 0, with
// its logits asked for where `logits`.
inline void set_row(llama_batch& batch, int i, llama_token token, int pos, bool logits) {
  batch.token[i] = token;
  batch.pos[i] = pos;
  batch.n_seq_id[i] = 1;
  batch.seq_id[i][0] = 0;
  batch.logits[i] = logits;
}

}  // namespace golden
