// revis run -m MODEL -p PROMPT: generate text, streamed to stdout, with
// timing on stderr; --json for one machine-readable object, --logits-out to
// dump logits in the shape of the llama.cpp golden files; --kv-dir to resume
// the prompt from a checkpoint and leave one behind (docs/kvstore.md);
// --draft/--lookup for speculative decoding; --grammar/--json-schema to
// hold the output to a GBNF grammar or a JSON Schema, as llama-cli does.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/draft_flags.h"
#include "cli/progress_line.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "kvstore/prefix_cache.h"
#include "revis/generate.h"

namespace revis::cli {
namespace {

struct RunArgs {
  EngineFlags engine;  // -m, -t, --mmap, --device, -ngl
  std::string prompt, prompt_file, logits_out, kv_dir;
  int n_predict = 256, ctx = 0;
  double kv_budget_mib = 0;
  std::optional<uint64_t> seed;
  bool json = false, ignore_eos = false;
  bool prompt_given = false;  // -p, even an empty one
  SamplingParams sampling;
  std::vector<std::string> stop;
  DraftFlags draft;
  // What the output must be (at most one): GBNF text or file, JSON Schema text or file.
  std::string grammar, grammar_file, json_schema, json_schema_file;
};

// The grammar the output is held to, null for free text. Errors name the flag.
Result<std::shared_ptr<const Grammar>> output_grammar(const RunArgs& args) {
  const std::pair<const char*, const std::string*> given[] = {{"--grammar", &args.grammar},
                                                               {"--grammar-file", &args.grammar_file},
                                                               {"--json-schema", &args.json_schema},
                                                               {"--json-schema-file", &args.json_schema_file}};
  const char* flag = nullptr;
  std::string text;
  for (const auto& [name, value] : given) {
    if (value->empty()) continue;
    if (flag) return Status::error(std::string(flag) + " and " + name + " both given (the output has one shape)");
    flag = name;
    text = *value;
  }
  if (!flag) return std::shared_ptr<const Grammar>();
  const std::string which = flag;
  if (which.ends_with("-file")) {
    auto content = read_file(text);
    if (!content.ok()) return Status::error(which + ": " + content.status().message());
    text = *content;
  }
  auto grammar = which.starts_with("--json-schema") ? compile_json_schema_text(text) : Grammar::parse(text);
  if (!grammar.ok()) return Status::error(which + ": " + grammar.status().message());
  return *grammar;
}

// Rows of n_vocab floats as a JSON array of arrays; "%.9g" round-trips float32.
void write_rows(std::ofstream& out, const std::vector<float>& values, size_t n_vocab) {
  out << '[';
  char buf[32];
  for (size_t row = 0; row * n_vocab < values.size(); ++row) {
    out << (row ? ",[" : "[");
    for (size_t j = 0; j < n_vocab; ++j) {
      std::snprintf(buf, sizeof buf, j ? ",%.9g" : "%.9g", values[row * n_vocab + j]);
      out << buf;
    }
    out << ']';
  }
  out << ']';
}

Status write_logits(const std::string& path, std::span<const int32_t> prompt, const GenerateResult& r, size_t n_vocab) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::error(path + ": cannot open for writing");
  out << "{\"prompt_tokens\":" << nlohmann::json(std::vector<int32_t>(prompt.begin(), prompt.end())).dump()
      << ",\"first_logits_position\":" << r.first_logits_position
      << ",\"greedy\":" << nlohmann::json(r.generated).dump() << ",\"prompt_logits\":";
  write_rows(out, r.prompt_logits, n_vocab);
  out << ",\"greedy_logits\":";
  write_rows(out, r.generated_logits, n_vocab);
  out << "}\n";
  out.flush();
  if (!out) return Status::error(path + ": write failed");
  return {};
}

int run(RunArgs& args) {
  std::string prompt = args.prompt;
  if (!args.prompt_file.empty()) {
    auto content = read_file(args.prompt_file);
    if (!content.ok()) return fail(content.status().message());
    prompt = *content;
  } else if (!args.prompt_given) {
    // `echo text | revis run -m M` and `revis run -m M < file`.
    if (isatty(STDIN_FILENO)) return usage_error("run needs a prompt: -p TEXT, -f FILE, or text on standard input");
    std::ostringstream in;
    in << std::cin.rdbuf();
    prompt = in.str();
  }
  if (!(args.kv_budget_mib >= 0)) return usage_error("--kv-budget: expected MiB >= 0 (0 = no limit)");
  if (args.n_predict < -1)
    return usage_error("-n: " + std::to_string(args.n_predict) + " (expected >= 0, or -1 for no limit)");
  args.sampling.seed = args.seed ? *args.seed : std::random_device{}();
  if (Status s = args.sampling.validate(); !s.ok()) return usage_error(s.message());
  auto grammar = output_grammar(args);
  if (!grammar.ok()) return usage_error(grammar.status().message());
  if (*grammar && (args.ignore_eos || !args.logits_out.empty()))
    return usage_error("--ignore-eos and --logits-out cannot go with a grammar: the grammar decides where the output ends");

  auto engine = load_engine(args.engine.options(args.ctx));
  if (!engine) return 1;
  auto drafter = make_drafter(*engine, args.draft);
  if (!drafter.ok()) return fail(drafter.status().message());
  const std::vector<int32_t> tokens = engine->tokenize(prompt, engine->add_bos_default(), false);
  if (tokens.empty()) return fail("the prompt is empty after tokenization");
  if (static_cast<int>(tokens.size()) > engine->info().n_ctx)
    return fail("the prompt has " + std::to_string(tokens.size()) + " tokens but the context is " +
                std::to_string(engine->info().n_ctx) + " (raise -c)");

  GenerateOptions options;
  // -1: until end of generation or a full context (stop reason "context"), as in llama.cpp.
  options.max_tokens = args.n_predict >= 0 ? args.n_predict : std::numeric_limits<int>::max();
  options.sampling = args.sampling;
  options.stop = args.stop;
  // Golden comparisons want exactly -n tokens, whatever they are.
  options.ignore_eog = args.ignore_eos || !args.logits_out.empty();
  options.record_logits = !args.logits_out.empty();
  options.drafter = drafter->get();
  options.draft_max = args.draft.max;
  std::unique_ptr<GrammarConstraint> constraint;
  if (*grammar) {
    constraint = std::make_unique<GrammarConstraint>(*grammar, TokenVocabulary::of(*engine));
    options.constraint = constraint.get();
  }

  // Without --kv-dir the cache is RAM only, and one run reuses nothing.
  auto cache = kvstore::PrefixCache::open(
      *engine, {.ram_sessions = 1,
                .kv_dir = args.kv_dir,
                .disk_budget_bytes = static_cast<uint64_t>(args.kv_budget_mib * 1048576.0),
                .warn = [](const std::string& message) { std::fprintf(stderr, "warning: %s\n", message.c_str()); }});
  if (!cache.ok()) return fail(cache.status().message());
  auto lease = (*cache)->acquire(tokens);
  if (!lease.ok()) return fail(lease.status().message());
  const std::string cache_source = lease->source;
  const double restore_ms = lease->cached.restore_ms;
  ProgressLine prefill_progress("prompt");
  show_prefill_progress(options, prefill_progress, static_cast<int>(tokens.size()), lease->cached.cached_tokens);
  auto result = generate(*engine, *lease->session, tokens, options, [&](std::string_view text) {
    if (args.json) return;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }, lease->cached);
  if (!result.ok()) return fail(result.status().message());
  const GenerateResult& r = *result;
  // A one-shot process: checkpoint the prompt now, before reporting.
  (*cache)->release(std::move(*lease), tokens, r.next_logits);
  (*cache)->flush();
  if (!args.json) std::printf("\n");

  const double prefill_tps = r.prefill_ms > 0 ? r.n_prompt * 1000.0 / r.prefill_ms : 0;
  // The first token comes from the prefill's logits; the rest cost one forward pass each.
  const size_t decoded = r.generated.empty() ? 0 : r.generated.size() - 1;
  const double gen_tps = r.generate_ms > 0 ? decoded * 1000.0 / r.generate_ms : 0;
  std::fprintf(stderr, "prompt %d tokens, prefill %.1f tok/s (%.0f ms); generated %zu tokens, %.1f tok/s; "
               "stop: %s; seed %llu\n",
               r.n_prompt, prefill_tps, r.prefill_ms, r.generated.size(), gen_tps,
               r.stop_reason.c_str(), (unsigned long long)args.sampling.seed);
  if (options.drafter)
    std::fprintf(stderr, "speculative: drafted %d tokens, accepted %d (%.0f%%)\n", r.draft_tokens, r.accepted_tokens,
                 r.draft_tokens > 0 ? 100.0 * r.accepted_tokens / r.draft_tokens : 0.0);
  if (r.cached_tokens > 0)
    std::fprintf(stderr, "resumed %d of %d prompt tokens from %s in %.1f ms\n", r.cached_tokens,
                 r.n_prompt, cache_source.c_str(), restore_ms);
  if ((*cache)->last_save_ms() > 0)
    std::fprintf(stderr, "saved a checkpoint of %d tokens in %.1f ms\n", r.n_prompt,
                 (*cache)->last_save_ms());

  if (args.json) {
    nlohmann::json j = {{"model", engine->info().path},      {"prompt_tokens", r.n_prompt},
                        {"cached_tokens", r.cached_tokens},  {"cache_source", cache_source},
                        {"restore_ms", restore_ms},          {"gen_tokens", r.generated.size()},
                        {"text", r.text},                    {"stop_reason", r.stop_reason},
                        {"ttft_ms", r.ttft_ms},              {"prefill_ms", r.prefill_ms},
                        {"prefill_tok_s", prefill_tps},      {"gen_tok_s", gen_tps},
                        {"seed", args.sampling.seed},        {"draft_tokens", r.draft_tokens},
                        {"accepted_tokens", r.accepted_tokens}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  if (!args.logits_out.empty())
    if (Status s = write_logits(args.logits_out, tokens, r, engine->info().n_vocab); !s.ok()) return fail(s.message());
  return 0;
}

}  // namespace

void add_sampling_options(CLI::App& cmd, SamplingParams& s) {
  cmd.add_option("--temp", s.temperature, "Temperature; 0 = greedy")->capture_default_str();
  cmd.add_option("--top-k", s.top_k, "Keep the k most likely tokens; 0 = off")->capture_default_str();
  cmd.add_option("--top-p", s.top_p, "Nucleus sampling mass; 1 = off")->capture_default_str();
  cmd.add_option("--min-p", s.min_p, "Drop tokens below min-p x the best probability; 0 = off")->capture_default_str();
  cmd.add_option("--repeat-penalty", s.repeat_penalty, "Penalty for recent tokens; 1 = off")->capture_default_str();
  cmd.add_option("--repeat-last-n", s.repeat_last_n, "Window of recent tokens the penalties see")->capture_default_str();
  cmd.add_option("--frequency-penalty", s.frequency_penalty, "OpenAI-style frequency penalty")->capture_default_str();
  cmd.add_option("--presence-penalty", s.presence_penalty, "OpenAI-style presence penalty")->capture_default_str();
}

void register_run(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt");
  auto args = std::make_shared<RunArgs>();
  cmd->add_option("-m,--model", args->engine.model, "GGUF model file")->required();
  auto* p = cmd->add_option("-p,--prompt", args->prompt, "Prompt text (default: standard input when it is not a terminal)");
  cmd->add_option("-f,--file", args->prompt_file, "Read the prompt from a file")->excludes(p);
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens to generate at most; -1 = until the end or a full context")
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->engine.threads, "Threads (default: physical cores)");
  add_engine_flags(*cmd, args->engine);
  cmd->add_option("-c,--ctx-size", args->ctx, "Context size in tokens (default: model's, at most 4096)");
  cmd->add_option("--seed", args->seed, "RNG seed (default: random, printed at the end)");
  cmd->add_option("--stop", args->stop, "Stop when this text is generated (repeatable)");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Keep generating past end-of-generation tokens");
  cmd->add_flag("--json", args->json, "Print one JSON object with the text and statistics instead of streaming");
  cmd->add_option("--logits-out", args->logits_out,
                  "Write prompt_tokens, prompt_logits, greedy, greedy_logits as JSON (implies --ignore-eos)");
  cmd->add_option("--kv-dir", args->kv_dir,
                  "Directory of KV checkpoints: resume the prompt's longest saved prefix, save the prompt after");
  cmd->add_option("--kv-budget", args->kv_budget_mib, "MiB the KV directory may hold (0 = no limit)")
      ->capture_default_str();
  cmd->add_option("--grammar", args->grammar, "Hold the output to this GBNF grammar (root rule: root)");
  cmd->add_option("--grammar-file", args->grammar_file, "Hold the output to the GBNF grammar in this file");
  cmd->add_option("-j,--json-schema", args->json_schema, "Hold the output to JSON valid against this JSON Schema");
  cmd->add_option("--json-schema-file", args->json_schema_file, "Hold the output to the JSON Schema in this file");
  add_sampling_options(*cmd, args->sampling);
  add_draft_options(*cmd, args->draft);
  cmd->callback([args, p, &exit_code] {
    args->prompt_given = p->count() > 0;
    exit_code = run(*args);
  });
}

}  // namespace revis::cli
