// llama_golden: llama.cpp's outputs on one model and prompt, in the golden
// format of ../shared/testdata/README.md: the prompt's tokens, a 32-token
// greedy continuation decoded one token at a time, and the logits at every
// position of prompt + continuation (teacher-forced, one batch). A tool
// linked against a llama.cpp build (build.sh), not part of revis.
//
//   llama_golden MODEL.gguf PROMPT_FILE OUT_STEM
// writes OUT_STEM.json and OUT_STEM.logits.f32. Settings as the shared data:
// 2 threads, KV cache F16, flash attention off.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "llama.h"
#include "llama_tool.h"

namespace {

constexpr int kGreedy = 32;

[[noreturn]] void die(const std::string& what) { golden::die("llama_golden", what); }

// Runs tokens at positions pos.. in one batch; logits for every row when all.
void decode(llama_context* ctx, const std::vector<llama_token>& tokens, int pos, bool all) {
  llama_batch batch = llama_batch_init(static_cast<int>(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i)
    golden::set_row(batch, static_cast<int>(i), tokens[i], pos + static_cast<int>(i), all || i + 1 == tokens.size());
  batch.n_tokens = static_cast<int>(tokens.size());
  if (llama_decode(ctx, batch) != 0) die("llama_decode failed");
  llama_batch_free(batch);
}

llama_token argmax(const float* row, int n) {
  int best = 0;
  for (int j = 1; j < n; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) die("usage: llama_golden MODEL.gguf PROMPT_FILE OUT_STEM");
  const std::string model_path = argv[1], out_stem = argv[3];
  const std::string prompt = golden::read_text(argv[2]);

  llama_model* model = golden::load_model("llama_golden", model_path);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  llama_context* ctx = llama_init_from_model(model, golden::context_params());
  if (!ctx) die("cannot create a context");

  // The prompt's tokens: BOS where the model adds one, special tokens not parsed.
  std::vector<llama_token> prompt_tokens(prompt.size() + 8);
  const int n = llama_tokenize(vocab, prompt.data(), static_cast<int32_t>(prompt.size()), prompt_tokens.data(),
                               static_cast<int32_t>(prompt_tokens.size()), llama_vocab_get_add_bos(vocab), false);
  if (n < 0) die("tokenize failed");
  prompt_tokens.resize(n);

  // Greedy, free-running.
  std::vector<llama_token> greedy;
  decode(ctx, prompt_tokens, 0, false);
  for (int i = 0; i < kGreedy; ++i) {
    greedy.push_back(argmax(llama_get_logits_ith(ctx, -1), n_vocab));
    if (i + 1 < kGreedy) decode(ctx, {greedy.back()}, n + i, false);
  }

  // Teacher-forced: prompt + greedy[:-1] in one batch, from an empty cache.
  llama_memory_clear(llama_get_memory(ctx), true);
  std::vector<llama_token> tokens = prompt_tokens;
  tokens.insert(tokens.end(), greedy.begin(), greedy.end() - 1);
  decode(ctx, tokens, 0, true);
  const std::string logits_path = out_stem + ".logits.f32";
  std::FILE* f = std::fopen(logits_path.c_str(), "wb");
  if (!f) die("cannot write " + logits_path);
  for (size_t k = 0; k < tokens.size(); ++k)
    std::fwrite(llama_get_logits_ith(ctx, static_cast<int32_t>(k)), sizeof(float), n_vocab, f);
  std::fclose(f);

  const std::string base = logits_path.substr(logits_path.find_last_of('/') + 1);
  std::string model_name = model_path.substr(model_path.find_last_of('/') + 1);
  std::ofstream json(out_stem + ".json");
  json << "{\"model\": " << golden::json_string(model_name) << ", \"prompt\": " << golden::json_string(prompt)
       << ", \"n_vocab\": " << n_vocab << ", \"prompt_tokens\": " << golden::json_ints(prompt_tokens)
       << ", \"greedy\": " << golden::json_ints(greedy) << ", \"logits_file\": " << golden::json_string(base)
       << ", \"n_rows\": " << tokens.size() << "}\n";

  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
