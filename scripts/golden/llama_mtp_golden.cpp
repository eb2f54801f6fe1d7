// llama_mtp_golden: llama.cpp's logits of a qwen35 file's MTP block over a
// prompt, as its speculative decoder feeds the block: row p pairs token p
// with the target's hidden state after output_norm at p - 1 (zeros for
// p = 0), at position p, all rows in one batch of the block's own context.
// A tool linked against a llama.cpp build (build.sh), not part of revis.
//
//   llama_mtp_golden MODEL.gguf PROMPT_FILE OUT_STEM
// writes OUT_STEM.json (model, prompt, n_vocab, prompt_tokens, logits_file,
// n_rows) and OUT_STEM.logits.f32 (row p: the block's logits at p, the
// guess for token p + 2). Settings as llama_golden: 2 threads, KV cache
// F16, flash attention off.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "llama.h"
#include "llama-ext.h"
#include "llama_tool.h"

namespace {

[[noreturn]] void die(const std::string& what) { golden::die("llama_mtp_golden", what); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) die("usage: llama_mtp_golden MODEL.gguf PROMPT_FILE OUT_STEM");
  const std::string model_path = argv[1], out_stem = argv[3];
  const std::string prompt = golden::read_text(argv[2]);

  llama_model* model = golden::load_model("llama_mtp_golden", model_path, /*mtp=*/true);
  if (llama_model_n_layer_nextn(model) < 1) die(model_path + " has no MTP block");
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab), n_embd = llama_model_n_embd(model);

  llama_context* target = llama_init_from_model(model, golden::context_params());
  if (!target) die("cannot create the target's context");
  llama_set_embeddings_nextn(target, true, /*masked=*/false);

  std::vector<llama_token> tokens(prompt.size() + 8);
  const int n = llama_tokenize(vocab, prompt.data(), static_cast<int32_t>(prompt.size()), tokens.data(),
                               static_cast<int32_t>(tokens.size()), llama_vocab_get_add_bos(vocab), false);
  if (n < 0) die("tokenize failed");
  tokens.resize(n);

  // The target over the prompt: its hidden state after output_norm per row.
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) golden::set_row(batch, i, tokens[i], i, true);
  batch.n_tokens = n;
  if (llama_decode(target, batch) != 0) die("llama_decode (target) failed");
  llama_batch_free(batch);
  std::vector<float> hidden(static_cast<size_t>(n) * n_embd, 0.0f);  // row p: h(p - 1)
  for (int p = 1; p < n; ++p) {
    const float* h = llama_get_embeddings_nextn_ith(target, p - 1);
    if (!h) die("no nextn embedding for row " + std::to_string(p - 1));
    std::memcpy(&hidden[static_cast<size_t>(p) * n_embd], h, n_embd * sizeof(float));
  }

  // The MTP block over (token p, h(p - 1)) at positions 0..n-1.
  llama_context_params cp = golden::context_params();
  cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
  cp.ctx_other = target;
  llama_context* mtp = llama_init_from_model(model, cp);
  if (!mtp) die("cannot create the MTP context");
  llama_batch both = llama_batch_init(n, n_embd, 1);
  both.token = static_cast<llama_token*>(std::malloc(sizeof(llama_token) * n));  // the batch holds embd only
  for (int i = 0; i < n; ++i) golden::set_row(both, i, tokens[i], i, true);
  std::memcpy(both.embd, hidden.data(), hidden.size() * sizeof(float));
  both.n_tokens = n;
  if (llama_decode(mtp, both) != 0) die("llama_decode (MTP) failed");

  const std::string logits_path = out_stem + ".logits.f32";
  std::FILE* f = std::fopen(logits_path.c_str(), "wb");
  if (!f) die("cannot write " + logits_path);
  for (int k = 0; k < n; ++k) std::fwrite(llama_get_logits_ith(mtp, k), sizeof(float), n_vocab, f);
  std::fclose(f);

  const std::string base = logits_path.substr(logits_path.find_last_of('/') + 1);
  const std::string model_name = model_path.substr(model_path.find_last_of('/') + 1);
  std::ofstream json(out_stem + ".json");
  json << "{\"model\": " << golden::json_string(model_name) << ", \"prompt\": " << golden::json_string(prompt)
       << ", \"n_vocab\": " << n_vocab << ", \"prompt_tokens\": " << golden::json_ints(tokens)
       << ", \"logits_file\": " << golden::json_string(base) << ", \"n_rows\": " << n << "}\n";

  std::free(both.token);
  both.token = nullptr;
  llama_batch_free(both);
  llama_free(mtp);
  llama_free(target);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
