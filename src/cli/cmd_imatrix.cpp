// revis imatrix -m MODEL -f TEXT -o FILE [--chunk N] [-c N]: the mean
// squared input activation of every channel of every matrix over a text,
// in chunks of -c tokens (each from an empty context, its first token made
// BOS where the model adds one), written in llama.cpp's GGUF imatrix format.
//
// Resumable: FILE is rewritten after every chunk (through a temporary file
// and a rename) with the chunks done so far; run again with the same text
// and -c, the command continues after the last chunk FILE holds.
#include <chrono>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress_line.h"
#include "cli/text_chunks.h"
#include "tools/imatrix_file.h"
#include "tools/imatrix_run.h"

namespace revis::cli {
namespace {

struct ImatrixArgs {
  std::string model, text, output;
  int chunks = 0;  // 0: all the text holds
  int n_ctx = 512;
  int threads = 0;
};

// The partial state in `output` to continue from, or a fresh start.
Result<Imatrix> starting_point(const ImatrixArgs& args) {
  Imatrix fresh;
  fresh.datasets = {args.text};
  fresh.chunk_size = args.n_ctx;
  if (!std::filesystem::exists(args.output)) return fresh;
  auto earlier = read_imatrix(args.output);
  if (!earlier.ok()) return earlier.status();
  if (earlier->chunk_size != args.n_ctx || earlier->datasets != fresh.datasets)
    return Status::error(args.output + ": holds an imatrix of chunks of " + std::to_string(earlier->chunk_size) +
                         " tokens over '" + (earlier->datasets.empty() ? "" : earlier->datasets[0]) +
                         "', not of -c " + std::to_string(args.n_ctx) + " over '" + args.text +
                         "': remove it or choose another -o to start afresh");
  return earlier;
}

int imatrix(const ImatrixArgs& args) {
  if (args.n_ctx < 8) return usage_error("-c: expected >= 8 tokens a chunk");
  if (args.chunks < 0) return usage_error("--chunk: expected >= 0");
  if (args.threads < 0) return usage_error("-t: expected >= 0");
  auto run = ImatrixRun::load(args.model, args.threads);
  if (!run.ok()) return fail(run.status().message());
  auto text = read_file(args.text);
  if (!text.ok()) return fail(text.status().message());

  auto chunks = text_chunks((*run)->tokenize(*text), args.text, args.n_ctx, args.chunks, (*run)->chunk_bos());
  if (!chunks.ok()) return fail(chunks.status().message());
  const auto n_chunks = static_cast<int64_t>(chunks->size());

  auto start = starting_point(args);
  if (!start.ok()) return fail(start.status().message());
  const int64_t first = start->chunk_count;
  (*run)->collect(std::move(*start));
  ImatrixCollector& collector = (*run)->collector();
  if (first > 0) std::fprintf(stderr, "%s: continuing after chunk %lld\n", args.output.c_str(), static_cast<long long>(first));

  ProgressLine progress("collecting");
  for (int64_t c = first; c < n_chunks; ++c) {
    progress.update(static_cast<size_t>(c - first), static_cast<size_t>(n_chunks - first),
                    "chunk " + std::to_string(c + 1) + "/" + std::to_string(n_chunks));
    if (Status s = (*run)->run_chunk((*chunks)[static_cast<size_t>(c)], args.n_ctx); !s.ok()) return fail(s.message());
    if (!collector.status().ok()) return fail(collector.status().with_context(args.output).message());
    collector.imatrix().chunk_count = c + 1;
    const std::string partial = args.output + ".partial";
    if (Status s = write_imatrix_gguf(collector.imatrix(), partial); !s.ok()) return fail(s.message());
    std::error_code error;
    std::filesystem::rename(partial, args.output, error);
    if (error) return fail(args.output + ": " + error.message());
  }
  progress.update(static_cast<size_t>(n_chunks - first), static_cast<size_t>(n_chunks - first));
  std::fprintf(stderr, "wrote %s: %zu matrices over %lld chunks of %d tokens\n", args.output.c_str(),
               collector.imatrix().entries.size(), static_cast<long long>(n_chunks), args.n_ctx);
  return 0;
}

}  // namespace

void register_imatrix(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("imatrix", "Compute an importance matrix over a text, for quantize --imatrix");
  auto args = std::make_shared<ImatrixArgs>();
  cmd->add_option("-m,--model", args->model, "GGUF model (F16 or Q8_0 is best)")->required();
  cmd->add_option("-f,--file", args->text, "Text to run through the model")->required();
  cmd->add_option("-o,--output", args->output, "Imatrix file to write (llama.cpp's GGUF format); an earlier partial run of it is continued")->required();
  cmd->add_option("--chunk,--chunks", args->chunks, "Process at most this many chunks (default: all the text holds)");
  cmd->add_option("-c,--ctx-size", args->n_ctx, "Tokens a chunk (default 512)");
  cmd->add_option("-t,--threads", args->threads, "Threads (default: physical cores)");
  cmd->callback([args, &exit_code] { exit_code = imatrix(*args); });
}

}  // namespace revis::cli
