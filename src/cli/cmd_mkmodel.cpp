// revis mkmodel: write a GGUF with random weights and a real model's layout.
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress_line.h"
#include "tools/synthetic.h"

namespace revis::cli {
namespace {

struct MkmodelArgs {
  std::string like, type = "F16", output;
  bool dry_run = false;
  SyntheticSpec spec;
};

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

int mkmodel(MkmodelArgs& args, const CLI::App& cmd) {
  SyntheticSpec spec = args.spec;
  // An architecture alone: its miniature where the defaults are not enough
  // (the other flags still apply to it).
  if (args.like.empty())
    if (auto miniature = synthetic_miniature(spec.arch)) args.like = *miniature;
  if (!args.like.empty()) {
    std::optional<SyntheticSpec> preset = synthetic_preset(args.like);
    if (!preset) {
      std::string names;
      for (const std::string& n : synthetic_preset_names()) names += (names.empty() ? "" : ", ") + n;
      return fail("--like '" + args.like + "' is not a known shape (expected one of: " + names + ")");
    }
    // A preset gives the shape; explicit flags still override it.
    SyntheticSpec merged = *preset;
    const auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
    if (given("--arch")) merged.arch = spec.arch;
    if (given("--embd")) merged.n_embd = spec.n_embd;
    if (given("--layers")) merged = with_layers(merged, spec.n_layer);
    if (given("--heads")) merged.n_head = spec.n_head;
    if (given("--kv-heads")) merged.n_head_kv = spec.n_head_kv;
    if (given("--head-dim")) merged.head_dim = spec.head_dim;
    if (given("--ff")) merged.n_ff = spec.n_ff;
    if (given("--vocab")) merged.n_vocab = spec.n_vocab;
    if (given("--nextn")) merged.n_nextn_layer = spec.n_nextn_layer;
    if (given("--experts")) merged.n_expert = spec.n_expert;
    if (given("--experts-used")) merged.n_expert_used = spec.n_expert_used;
    if (given("--ff-expert")) merged.n_ff_expert = spec.n_ff_expert;
    if (given("--sliding-window")) merged.sliding_window = spec.sliding_window;
    if (given("--sliding-pattern")) merged.sliding_pattern = spec.sliding_pattern;
    if (given("--softcap")) merged.logit_softcap = spec.logit_softcap;
    if (given("--per-layer-embd")) merged.n_embd_per_layer = spec.n_embd_per_layer;
    if (given("--shared-kv-layers")) merged.shared_kv_layers = spec.shared_kv_layers;
    if (given("--fused-gate-up")) merged.fused_gate_up_exps = spec.fused_gate_up_exps;
    if (given("--double-wide-ffn")) merged.double_wide_shared_ffn = spec.double_wide_shared_ffn;
    if (given("--head-dim-swa")) merged.head_dim_swa = spec.head_dim_swa;
    if (given("--layer-kv-heads")) merged.layer_kv_heads = spec.layer_kv_heads;
    merged.vocab_from = spec.vocab_from;
    merged.seed = spec.seed;
    spec = merged;
  }
  const std::optional<QuantMix> mix = parse_quant_mix(args.type);
  if (!mix) return fail("--type '" + args.type + "' is not supported (expected " + quant_mix_names() + ")");
  spec.mix = *mix;
  if (args.dry_run) {
    Result<SyntheticSize> size = synthetic_model_size(spec);
    if (!size.ok()) return fail(size.status().message());
    std::printf("%s-shaped %s model, %d layers: %d tensors, %llu bytes (%.2f GiB) of tensors; "
                "%llu bytes (%.2f GiB) of weights read per token\n",
                spec.arch.c_str(), quant_mix_name(spec.mix), spec.n_layer, size->n_tensors,
                static_cast<unsigned long long>(size->tensor_bytes), gib(size->tensor_bytes),
                static_cast<unsigned long long>(size->bytes_per_token), gib(size->bytes_per_token));
    return 0;
  }
  if (args.output.empty()) return usage_error("--output is required (or --dry-run)");
  ThreadPool pool(ThreadPool::default_threads());
  ProgressLine progress("generating");
  Status s = write_synthetic_model(spec, args.output, pool, [&progress](size_t done, size_t total, const std::string& name) {
    progress.update(done, total, name);
  });
  if (!s.ok()) return fail(s.message());
  std::fprintf(stderr, "wrote %s: %s-shaped %s model with random weights\n", args.output.c_str(), spec.arch.c_str(),
               quant_mix_name(spec.mix));
  return 0;
}

}  // namespace

void register_mkmodel(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("mkmodel", "Write a synthetic GGUF model (random weights, real layout)");
  auto args = std::make_shared<MkmodelArgs>();
  SyntheticSpec& s = args->spec;
  cmd->add_option("-o,--output", args->output, "Output GGUF file");
  cmd->add_flag("--dry-run", args->dry_run,
                "Write nothing: print the file's tensor bytes and the weight bytes a token reads");
  cmd->add_option("--like", args->like, "Shape of a known model: tiny, llama-3.2-1b, llama-3.1-8b, qwen3-0.6b, qwen3-4b, qwen3-30b-a3b, "
                  "deepseek-v2-lite, deepseek-v3-small, deepseek-v4-flash, deepseek-v4-tiny, gemma-3-4b, gemma3-small, gemma4-small, "
                  "gemma-4-e2b, gemma-4-e4b, gemma-4-26b-a4b, gemma-4-31b, qwen3moe-tiny, "
                  "deepseek2-tiny, gpt-oss-20b, gpt-oss-tiny, qwen3.5-9b, qwen35-tiny, qwen35moe-tiny, qwen3next-tiny");
  cmd->add_option("--type", args->type, "Tensor type mix (as for quantize)")->capture_default_str();
  cmd->add_option("--arch", s.arch,
                  "llama, qwen2, qwen3, qwen3moe, deepseek2, deepseek4, gemma3, gemma4, gpt-oss, qwen35, qwen35moe or qwen3next "
                  "(alone: a small file)")
      ->capture_default_str();
  cmd->add_option("--embd", s.n_embd, "Embedding width")->capture_default_str();
  cmd->add_option("--layers", s.n_layer, "Number of blocks")->capture_default_str();
  cmd->add_option("--heads", s.n_head, "Attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", s.n_head_kv, "Key/value heads")->capture_default_str();
  cmd->add_option("--head-dim", s.head_dim, "Head width (default embd/heads)");
  cmd->add_option("--ff", s.n_ff, "Feed-forward width")->capture_default_str();
  cmd->add_option("--experts", s.n_expert, "Experts (qwen3moe, deepseek4, gpt-oss)");
  cmd->add_option("--experts-used", s.n_expert_used, "Experts per token (qwen3moe, deepseek4, gpt-oss)");
  cmd->add_option("--ff-expert", s.n_ff_expert, "Expert feed-forward width (qwen3moe, deepseek4, gpt-oss)");
  cmd->add_option("--vocab", s.n_vocab, "Pad the built-in byte vocabulary to this size");
  cmd->add_option("--vocab-from", s.vocab_from, "Copy the tokenizer from this GGUF");
  cmd->add_flag("--tied", s.tied_output, "Use token_embd as the output matrix");
  cmd->add_option("--nextn", s.n_nextn_layer, "Multi-token-prediction blocks after the layers (deepseek2, qwen35, qwen35moe)");
  cmd->add_option("--sliding-window", s.sliding_window, "Positions a local layer sees (gemma3, gpt-oss, deepseek4)");
  cmd->add_option("--sliding-pattern", s.sliding_pattern, "Every this many layers one is global (gemma3, gemma4)");
  cmd->add_option("--softcap", s.logit_softcap, "Soft cap of the final logits (gemma3, gemma4); 0 writes none, which gemma3 reads as no cap and gemma4 as 30, as llama.cpp does");
  cmd->add_option("--per-layer-embd", s.n_embd_per_layer, "Per-layer embedding width, 0 none (gemma4)");
  cmd->add_option("--shared-kv-layers", s.shared_kv_layers, "Last layers that read earlier layers' caches (gemma4)");
  cmd->add_flag("--fused-gate-up", s.fused_gate_up_exps,
                "Write each layer's gate and up experts as one ffn_gate_up_exps tensor (gemma4)");
  cmd->add_flag("--double-wide-ffn", s.double_wide_shared_ffn,
                "Make the layers that read earlier caches twice --ff wide, one feed_forward_length per layer (gemma4)");
  cmd->add_option("--head-dim-swa", s.head_dim_swa, "Head width of the local layers, 0 as --head-dim (gemma4)");
  cmd->add_option("--layer-kv-heads", s.layer_kv_heads, "Key/value heads of each layer, comma-separated (gemma4)")
      ->delimiter(',');
  cmd->add_option("--seed", s.seed, "Seed for the weights")->capture_default_str();
  cmd->callback([args, cmd, &exit_code] { exit_code = mkmodel(*args, *cmd); });
}

}  // namespace revis::cli
