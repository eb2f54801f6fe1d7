// revis demo: works offline on a fresh machine. Creates (once) a tiny
// synthetic model in the cache directory and generates from it.
#include <cstdlib>
#include <filesystem>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "engine/generate.h"
#include "model/synthetic.h"

namespace revis::cli {
namespace {

struct DemoArgs {
  std::string cache_dir;
  std::string prompt = "One machine, one inference:";
  int n_predict = 48;
};

std::filesystem::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "revis";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "revis";
  return std::filesystem::temp_directory_path() / "revis-cache";
}

int demo(const DemoArgs& args) {
  const std::filesystem::path dir = args.cache_dir.empty() ? default_cache_dir() : std::filesystem::path(args.cache_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create the cache directory: " + ec.message());
  const std::string model = (dir / "revis-tiny-Q8_0.gguf").string();

  std::fprintf(stderr,
               "revis demo: no model is downloaded here, so this runs a tiny synthetic model whose weights are\n"
               "RANDOM: the text below is meaningless, but every step (GGUF loading, tokenizer, forward pass,\n"
               "Q8_0 kernels, sampling, streaming) is the real engine.\n\n");
  if (!std::filesystem::exists(model)) {
    SyntheticSpec spec = *synthetic_preset("tiny");
    spec.mix = QuantMix::kQ8_0;
    ThreadPool pool(ThreadPool::default_threads());
    Status s = write_synthetic_model(spec, model, pool, [](size_t done, size_t total, const std::string& name) {
      print_progress("creating demo model", done, total, name);
    });
    if (!s.ok()) return fail(s.message());
  }

  auto engine = load_engine({.model_path = model, .n_ctx = 512, .n_threads = 0});
  if (!engine) return 1;
  GenerateOptions options;
  options.max_tokens = args.n_predict;
  options.sampling.seed = 42;
  const std::vector<int32_t> tokens = engine->tokenize(args.prompt, engine->add_bos_default(), false);
  auto session = engine->new_session();
  std::printf("%s", args.prompt.c_str());
  auto result = generate(*engine, *session, tokens, options, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  if (!result.ok()) return fail(result.status().message());
  const GenerateResult& r = *result;
  const double gen_tps = r.generate_ms > 0 && r.generated.size() > 1 ? (r.generated.size() - 1) * 1000.0 / r.generate_ms : 0;
  std::printf("\n\n");
  std::fprintf(stderr,
               "prompt %zu tokens in %.0f ms; generated %zu tokens at %.1f tok/s\n\n"
               "To run a real model:   revis run -m path/to/model.gguf -p \"Hello\" -n 128\n"
               "To inspect a GGUF:     revis inspect path/to/model.gguf\n"
               "To quantize:           revis quantize model-F16.gguf model-Q4_K_M.gguf Q4_K_M\n",
               r.prompt_tokens.size(), r.prefill_ms, r.generated.size(), gen_tps);
  return 0;
}

}  // namespace

void register_demo(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("demo", "Run the engine offline on a tiny synthetic model");
  auto args = std::make_shared<DemoArgs>();
  cmd->add_option("--cache-dir", args->cache_dir, "Where the demo model is kept (default ~/.cache/revis)");
  cmd->add_option("-p,--prompt", args->prompt, "Prompt")->capture_default_str();
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens to generate")->capture_default_str();
  cmd->callback([args, &exit_code] { exit_code = demo(*args); });
}

}  // namespace revis::cli
