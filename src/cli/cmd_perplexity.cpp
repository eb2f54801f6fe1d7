// revis perplexity -m MODEL -f TEXT [-c N] [--chunk N]: perplexity over a
// text the way llama.cpp's llama-perplexity measures it. The text is cut
// into chunks of -c tokens, each run from an empty context with its first
// token made BOS where the model adds one; the first half of a chunk is
// context only, and each later position's logits score the next token:
// PPL = exp(mean over scored tokens of -log softmax(logits)[next]).
// Prints "perplexity P over C chunks of N tokens (S tokens scored)" on
// stdout; the running estimate goes to the progress line.
//
// --kl-divergence-base FILE also saves each scored position's
// log-probabilities (tools/kld_base_file.h); with --kl-divergence the run
// reads FILE instead (revis's layout or llama-perplexity's), scores the tokens it holds (-f and -c may then be
// left out; given, they must give the same chunks), and reports against
// the reference: mean KL(reference || this model) per position, its 99th
// percentile and maximum, how often both models' most likely token agree,
// and the reference's perplexity next to this one's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress_line.h"
#include "cli/text_chunks.h"
#include "revis/engine.h"
#include "tools/kld_base_file.h"

namespace revis::cli {
namespace {

struct PerplexityArgs {
  EngineFlags engine;  // -m, -t, --mmap, --device, -ngl
  std::string text;
  int n_ctx = 512;
  bool n_ctx_given = false;
  int chunks = 0;  // 0: all the text holds
  std::string kld_base;  // --kl-divergence-base FILE
  bool kld = false;      // --kl-divergence: compare against kld_base instead of writing it
};

// What --kl-divergence accumulates over the scored positions.
struct Divergence {
  std::vector<double> kld;  // per position
  int64_t top_agree = 0;
  double base_nll = 0;

  // One position: the reference's row against this model's log-probabilities.
  void add(const KldRow& base, const std::vector<double>& lp, int32_t next) {
    double sum = 0;
    for (size_t j = 0; j < lp.size(); ++j)
      if (base.log_probs[j] > base.weightless_at_or_below)
        sum += std::exp(base.log_probs[j]) * (base.log_probs[j] - lp[j]);
    kld.push_back(sum);
    const size_t top = static_cast<size_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
    if (top == static_cast<size_t>(base.top)) ++top_agree;
    base_nll -= base.log_probs[static_cast<size_t>(next)];
  }

  void print(double nll) const {
    const double n = static_cast<double>(kld.size());
    double mean = 0, square = 0;
    for (double v : kld) {
      mean += v / n;
      square += v * v / n;
    }
    const double std_error = kld.size() > 1 ? std::sqrt(std::max(0.0, square - mean * mean) / (n - 1)) : 0;
    std::vector<double> sorted = kld;
    std::sort(sorted.begin(), sorted.end());
    const double p99 = sorted[std::min(sorted.size() - 1, static_cast<size_t>(0.99 * n))];
    std::printf("base perplexity %.6f, ln(PPL / PPL base) %.6f\n", std::exp(base_nll / n), (nll - base_nll) / n);
    std::printf("mean KL divergence %.6f +- %.6f (99th percentile %.6f, max %.6f)\n", mean, std_error, p99,
                sorted.back());
    std::printf("top-1 agreement %.3f %% (%lld of %zu)\n", 100.0 * static_cast<double>(top_agree) / n,
                static_cast<long long>(top_agree), kld.size());
  }
};

// The reference's chunks for --kl-divergence, checked against this model
// and, where given, against -f and -c. Each chunk's first token is made BOS
// where the model adds one: llama-perplexity's files hold the text's
// tokens, not the BOS it ran in their place.
Result<std::vector<std::vector<int32_t>>> reference_chunks(const KldBaseReader& base, const Engine& engine,
                                                           const PerplexityArgs& args, int32_t bos,
                                                           const std::vector<std::vector<int32_t>>* text) {
  const KldBaseHeader& h = base.header();
  if (h.n_vocab != engine.info().n_vocab)
    return Status::error(args.kld_base + ": logits over a vocabulary of " + std::to_string(h.n_vocab) + " tokens; " +
                         args.engine.model + " has " + std::to_string(engine.info().n_vocab) +
                         " (the reference was another model family)");
  if (args.n_ctx_given && args.n_ctx != h.n_ctx)
    return Status::error(args.kld_base + ": chunks of " + std::to_string(h.n_ctx) + " tokens, but -c " +
                         std::to_string(args.n_ctx));
  std::vector<std::vector<int32_t>> chunks;
  for (int c = 0; c < h.n_chunks; ++c) {
    chunks.emplace_back(h.tokens.begin() + static_cast<ptrdiff_t>(c) * h.n_ctx,
                        h.tokens.begin() + static_cast<ptrdiff_t>(c + 1) * h.n_ctx);
    if (bos >= 0) chunks.back()[0] = bos;
  }
  if (text != nullptr) {
    const size_t compared = std::min(text->size(), chunks.size());
    if (text->size() < chunks.size() || !std::equal(chunks.begin(), chunks.begin() + static_cast<ptrdiff_t>(compared),
                                                     text->begin()))
      return Status::error(args.kld_base + ": its " + std::to_string(h.n_chunks) + " chunks are not the tokens of " +
                           args.text + " under " + args.engine.model + "'s tokenizer (another text, or another vocabulary)");
  }
  if (args.chunks > 0 && args.chunks < h.n_chunks) chunks.resize(static_cast<size_t>(args.chunks));
  return chunks;
}

int perplexity(const PerplexityArgs& args) {
  if (args.n_ctx < 8) return usage_error("-c: expected >= 8 tokens a chunk");
  if (args.chunks < 0) return usage_error("--chunk: expected >= 0");
  if (args.engine.threads < 0) return usage_error("-t: expected >= 0");
  if (args.kld && args.kld_base.empty()) return usage_error("--kl-divergence: needs --kl-divergence-base FILE");
  if (!args.kld && args.text.empty()) return usage_error("-f: the text to score is required");
  std::unique_ptr<KldBaseReader> base;
  int n_ctx = args.n_ctx;
  if (args.kld) {
    auto opened = KldBaseReader::open(args.kld_base);
    if (!opened.ok()) return fail(opened.status().message());
    base = std::move(*opened);
    n_ctx = base->header().n_ctx;
  }
  auto engine = load_engine(args.engine.options(n_ctx));
  if (!engine) return kExitRuntimeError;

  const int32_t bos = engine->add_bos_default() ? engine->info().bos.id : -1;
  std::optional<std::vector<std::vector<int32_t>>> text_tokens;
  if (!args.text.empty()) {
    auto text = read_file(args.text);
    if (!text.ok()) return fail(text.status().message());
    auto chunks = text_chunks(engine->tokenize(*text, /*add_bos=*/false, /*parse_special=*/false), args.text, n_ctx,
                              args.kld ? 0 : args.chunks, bos);
    if (!chunks.ok()) return fail(chunks.status().message());
    text_tokens = std::move(*chunks);
  }
  std::vector<std::vector<int32_t>> chunks;
  if (base) {
    auto reference = reference_chunks(*base, *engine, args, bos, text_tokens ? &*text_tokens : nullptr);
    if (!reference.ok()) return fail(reference.status().message());
    chunks = std::move(*reference);
  } else {
    chunks = std::move(*text_tokens);
  }
  const size_t n_chunks = chunks.size();

  std::unique_ptr<KldBaseWriter> writer;
  if (!args.kld && !args.kld_base.empty()) {
    KldBaseHeader header{.n_vocab = engine->info().n_vocab, .n_ctx = n_ctx, .n_chunks = static_cast<int32_t>(n_chunks), .tokens = {}};
    for (const auto& chunk : chunks) header.tokens.insert(header.tokens.end(), chunk.begin(), chunk.end());
    auto created = KldBaseWriter::create(args.kld_base, header);
    if (!created.ok()) return fail(created.status().message());
    writer = std::move(*created);
  }

  ProgressLine progress("perplexity");
  const int first = n_ctx / 2;
  double nll = 0;
  int64_t scored = 0;
  Divergence divergence;
  for (size_t c = 0; c < n_chunks; ++c) {
    progress.update(c, n_chunks,
                    scored > 0 ? "PPL so far " + std::to_string(std::exp(nll / static_cast<double>(scored))) : "");
    const std::vector<int32_t>& chunk = chunks[c];
    auto session = engine->new_session();
    if (Status s = session->eval(chunk, /*all_logits=*/true); !s.ok()) return fail(s.message());
    for (int i = first; i < n_ctx - 1; ++i) {
      const int32_t next = chunk[static_cast<size_t>(i) + 1];
      const std::vector<double> lp = log_softmax(session->logits(i));
      nll -= lp[static_cast<size_t>(next)];
      ++scored;
      if (writer) {
        if (Status s = writer->add_row(session->logits(i)); !s.ok()) return fail(s.message());
      } else if (base) {
        auto row = base->next_row();
        if (!row.ok()) return fail(row.status().message());
        divergence.add(*row, lp, next);
      }
    }
  }
  progress.update(n_chunks, n_chunks);
  if (writer) {
    if (Status s = writer->finish(); !s.ok()) return fail(s.message());
  }
  std::printf("perplexity %.6f over %zu chunks of %d tokens (%lld tokens scored)\n",
              std::exp(nll / static_cast<double>(scored)), n_chunks, n_ctx, static_cast<long long>(scored));
  if (base) divergence.print(nll);
  return 0;
}

}  // namespace

void register_perplexity(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a model over a text, as llama-perplexity measures it");
  auto args = std::make_shared<PerplexityArgs>();
  cmd->add_option("-m,--model", args->engine.model, "GGUF model")->required();
  cmd->add_option("-f,--file", args->text, "Text to score (with --kl-divergence: optional, the file holds the tokens)");
  auto* ctx = cmd->add_option("-c,--ctx-size", args->n_ctx,
                              "Tokens a chunk; the second half of each is scored (default 512)");
  cmd->add_option("--chunk,--chunks", args->chunks, "Score at most this many chunks (default: all the text holds)");
  cmd->add_option("-t,--threads", args->engine.threads, "Threads (default: physical cores)");
  add_engine_flags(*cmd, args->engine);
  cmd->add_option("--kl-divergence-base", args->kld_base,
                  "Save the scored positions' log-probabilities to FILE (with --kl-divergence: read them from FILE)");
  cmd->add_flag("--kl-divergence", args->kld,
                "Compare against --kl-divergence-base FILE: mean KL divergence, top-1 agreement, both perplexities");
  cmd->callback([args, ctx, &exit_code] {
    args->n_ctx_given = ctx->count() > 0;
    exit_code = perplexity(*args);
  });
}

}  // namespace revis::cli
