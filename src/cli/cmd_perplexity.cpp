// revis perplexity -m MODEL -f TEXT [-c N] [--chunk N]: perplexity over a
// text the way llama.cpp's llama-perplexity measures it. The text is cut
// into chunks of -c tokens, each run from an empty context with its first
// token made BOS where the model adds one; the first half of a chunk is
// context only, and each later position's logits score the next token:
// PPL = exp(mean over scored tokens of -log softmax(logits)[next]).
// Prints "perplexity P over C chunks of N tokens (S tokens scored)" on
// stdout; the running estimate goes to the progress line.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress_line.h"
#include "cli/text_chunks.h"
#include "revis/engine.h"
#include "tokenizer/tokenizer.h"

namespace revis::cli {
namespace {

struct PerplexityArgs {
  std::string model, text;
  int n_ctx = 512;
  int chunks = 0;  // 0: all the text holds
  int threads = 0;
};

// -log softmax(row)[target], in double.
double negative_log_likelihood(std::span<const float> row, int32_t target) {
  double largest = row[0];
  for (float v : row) largest = std::max(largest, static_cast<double>(v));
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - largest);
  return std::log(sum) + largest - row[static_cast<size_t>(target)];
}

int perplexity(const PerplexityArgs& args) {
  if (args.n_ctx < 8) return usage_error("-c: expected >= 8 tokens a chunk");
  if (args.chunks < 0) return usage_error("--chunk: expected >= 0");
  if (args.threads < 0) return usage_error("-t: expected >= 0");
  auto text = read_file(args.text);
  if (!text.ok()) return fail(text.status().message());
  auto engine = load_engine({.model_path = args.model, .n_ctx = args.n_ctx, .n_threads = args.threads});
  if (!engine) return kExitRuntimeError;
  const int32_t bos = engine->add_bos_default() ? engine->tokenizer().bos() : -1;
  auto chunks = text_chunks(engine->tokenize(*text, /*add_bos=*/false, /*parse_special=*/false), args.text,
                            args.n_ctx, args.chunks, bos);
  if (!chunks.ok()) return fail(chunks.status().message());
  const size_t n_chunks = chunks->size();

  ProgressLine progress("perplexity");
  const int first = args.n_ctx / 2;
  double nll = 0;
  int64_t scored = 0;
  for (size_t c = 0; c < n_chunks; ++c) {
    progress.update(c, n_chunks,
                    scored > 0 ? "PPL so far " + std::to_string(std::exp(nll / static_cast<double>(scored))) : "");
    const std::vector<int32_t>& chunk = (*chunks)[c];
    auto session = engine->new_session();
    if (Status s = session->eval(chunk, /*all_logits=*/true); !s.ok()) return fail(s.message());
    for (int i = first; i < args.n_ctx - 1; ++i) {
      nll += negative_log_likelihood(session->logits(i), chunk[static_cast<size_t>(i) + 1]);
      ++scored;
    }
  }
  progress.update(n_chunks, n_chunks);
  std::printf("perplexity %.6f over %zu chunks of %d tokens (%lld tokens scored)\n",
              std::exp(nll / static_cast<double>(scored)), n_chunks, args.n_ctx,
              static_cast<long long>(scored));
  return 0;
}

}  // namespace

void register_perplexity(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a model over a text, as llama-perplexity measures it");
  auto args = std::make_shared<PerplexityArgs>();
  cmd->add_option("-m,--model", args->model, "GGUF model")->required();
  cmd->add_option("-f,--file", args->text, "Text to score")->required();
  cmd->add_option("-c,--ctx-size", args->n_ctx, "Tokens a chunk; the second half of each is scored (default 512)");
  cmd->add_option("--chunk,--chunks", args->chunks, "Score at most this many chunks (default: all the text holds)");
  cmd->add_option("-t,--threads", args->threads, "Threads (default: physical cores)");
  cmd->callback([args, &exit_code] { exit_code = perplexity(*args); });
}

}  // namespace revis::cli
