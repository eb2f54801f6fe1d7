#include "tools/quantize.h"

#include <cctype>
#include <iterator>
#include <memory>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "tools/imatrix_file.h"

namespace revis {
namespace {

struct MixEntry {
  QuantMix mix;
  const char* name;
  uint32_t file_type;  // llama.cpp's LLAMA_FTYPE numbering
};
constexpr MixEntry kMixes[] = {
    {QuantMix::kF32, "F32", 0},       {QuantMix::kF16, "F16", 1},       {QuantMix::kQ8_0, "Q8_0", 7},
    {QuantMix::kQ4_0, "Q4_0", 2},     {QuantMix::kQ4_1, "Q4_1", 3},     {QuantMix::kQ5_0, "Q5_0", 8},
    {QuantMix::kQ5_1, "Q5_1", 9},     {QuantMix::kQ4_K_M, "Q4_K_M", 15}, {QuantMix::kQ5_K_M, "Q5_K_M", 17},
    {QuantMix::kQ6_K, "Q6_K", 18},    {QuantMix::kQ2_K, "Q2_K", 10},    {QuantMix::kQ3_K_S, "Q3_K_S", 11},
    {QuantMix::kQ3_K_M, "Q3_K_M", 12}, {QuantMix::kQ3_K_L, "Q3_K_L", 13}, {QuantMix::kIQ2_XS, "IQ2_XS", 20},
    {QuantMix::kIQ3_XXS, "IQ3_XXS", 23}, {QuantMix::kIQ3_S, "IQ3_S", 26}, {QuantMix::kIQ4_XS, "IQ4_XS", 30},
    {QuantMix::kMoe2Bit, "MOE-2BIT", 19}, {QuantMix::kMoe3Bit, "MOE-3BIT", 23},
    {QuantMix::kMxfp4Moe, "MXFP4_MOE", 38},
};

// The layers whose attn_v / ffn_down get more bits in the _M mixes.
bool layer_gets_more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

TensorType fallback_for_short_rows(TensorType type) {
  switch (type) {
    case TensorType::Q2_K:
    case TensorType::Q3_K: return TensorType::Q4_0;
    case TensorType::Q4_K: return TensorType::Q5_0;
    case TensorType::Q5_K: return TensorType::Q5_1;
    case TensorType::Q6_K: return TensorType::Q8_0;
    case TensorType::IQ1_S:
    case TensorType::IQ1_M:
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S:
    case TensorType::IQ3_XXS:
    case TensorType::IQ3_S:
    case TensorType::IQ4_XS: return TensorType::IQ4_NL;
    default: return type;
  }
}

// What llama.cpp's mixes tell apart.
enum class Role { kOutput, kTokenEmbd, kAttnQ, kAttnK, kAttnV, kAttnOutput, kFfnDown, kOther };

Role role_of(const std::string& name, const TensorContext& ctx) {
  if (name == "output.weight" || (ctx.output_is_tied && name == "token_embd.weight")) return Role::kOutput;
  if (name == "token_embd.weight") return Role::kTokenEmbd;
  if (contains(name, "attn_q.")) return Role::kAttnQ;
  if (contains(name, "attn_k.")) return Role::kAttnK;
  if (contains(name, "attn_v.")) return Role::kAttnV;
  if (contains(name, "attn_output")) return Role::kAttnOutput;
  if (contains(name, "ffn_down")) return Role::kFfnDown;
  return Role::kOther;
}

bool is_low_bit_mix(QuantMix mix) {
  switch (mix) {
    case QuantMix::kQ2_K:
    case QuantMix::kQ3_K_S:
    case QuantMix::kQ3_K_M:
    case QuantMix::kQ3_K_L:
    case QuantMix::kIQ2_XS:
    case QuantMix::kIQ3_XXS:
    case QuantMix::kIQ3_S:
    case QuantMix::kIQ4_XS: return true;
    default: return false;
  }
}

// llama.cpp's rules (llama-quant.cpp) for the K-quant and IQ mixes of three
// bits and less and IQ4_XS, for the architectures revis runs.
TensorType low_bit_type(QuantMix mix, Role role, int layer, const TensorContext& ctx) {
  using T = TensorType;
  const bool first_eighth = layer < ctx.n_layer / 8;
  switch (mix) {
    case QuantMix::kQ2_K:
      switch (role) {
        case Role::kOutput: return T::Q6_K;
        case Role::kAttnV: return ctx.n_gqa >= 4 ? T::Q4_K : T::Q3_K;
        case Role::kAttnOutput:
        case Role::kFfnDown: return T::Q3_K;
        default: return T::Q2_K;
      }
    case QuantMix::kQ3_K_S: return role == Role::kOutput ? T::Q6_K : T::Q3_K;
    case QuantMix::kQ3_K_M:
      switch (role) {
        case Role::kOutput: return T::Q6_K;
        case Role::kAttnV: return layer < 2 ? T::Q5_K : T::Q4_K;
        case Role::kFfnDown: return layer < ctx.n_layer / 16 ? T::Q5_K : T::Q4_K;
        case Role::kAttnOutput: return T::Q4_K;
        default: return T::Q3_K;
      }
    case QuantMix::kQ3_K_L:
      switch (role) {
        case Role::kOutput: return T::Q6_K;
        case Role::kAttnV:
        case Role::kAttnOutput:
        case Role::kFfnDown: return T::Q5_K;
        default: return T::Q3_K;
      }
    case QuantMix::kIQ2_XS:
      switch (role) {
        case Role::kOutput: return T::Q5_K;
        case Role::kTokenEmbd: return T::Q2_K;
        case Role::kAttnV: return ctx.n_gqa >= 4 || ctx.n_expert >= 4 ? T::Q4_K : T::Q2_K;
        case Role::kFfnDown: return first_eighth ? T::Q2_K : T::IQ2_XS;
        default: return T::IQ2_XS;
      }
    case QuantMix::kIQ3_XXS:
      switch (role) {
        case Role::kOutput: return T::Q5_K;
        case Role::kTokenEmbd:
        case Role::kAttnOutput: return T::IQ3_S;
        case Role::kAttnQ:
        case Role::kAttnK: return ctx.has_imatrix ? T::IQ2_S : T::IQ3_XXS;
        case Role::kAttnV: return ctx.n_gqa >= 4 ? T::Q4_K : ctx.has_imatrix ? T::IQ3_XXS : T::IQ3_S;
        case Role::kFfnDown: return ctx.has_imatrix ? T::IQ3_XXS : first_eighth ? T::Q4_K : T::Q3_K;
        default: return T::IQ3_XXS;
      }
    case QuantMix::kIQ3_S:
      if (role == Role::kOutput) return T::Q6_K;
      return role == Role::kAttnV && ctx.n_gqa >= 4 ? T::Q4_K : T::IQ3_S;
    case QuantMix::kIQ4_XS:
      switch (role) {
        case Role::kOutput: return T::Q6_K;
        case Role::kAttnV: return ctx.n_gqa >= 4 ? T::Q5_K : T::IQ4_XS;
        case Role::kFfnDown: return first_eighth && !ctx.has_imatrix ? T::Q5_K : T::IQ4_XS;
        default: return T::IQ4_XS;
      }
    default: return T::F16;  // not one of these mixes (is_low_bit_mix)
  }
}

// ds4's shape of mix: the routed experts, which hold nearly all of an MoE
// model's bytes and of which a token reads only a few, in `gate_up` (their
// ffn_gate_exps and ffn_up_exps) and `down` (ffn_down_exps); everything
// every token reads (attention, shared experts, embeddings, output) Q8_0.
// MOE-2BIT is ds4's mix. MOE-3BIT keeps its shape a step up: gate/up in the
// smallest 3-bit grid type, down, whose errors go straight into the
// residual stream, one step above. On the shared qwen3moe model against
// its Q8_0 file (docs/formats.md) down in IQ4_XS gave a 18 % lower mean KL
// divergence than in Q3_K or IQ3_S, and the same as Q4_K's in fewer bits.
TensorType routed_expert_mix(const std::string& name, TensorType gate_up, TensorType down) {
  if (contains(name, "ffn_down_exps")) return down;
  if (contains(name, "ffn_gate_exps") || contains(name, "ffn_up_exps")) return gate_up;
  return TensorType::Q8_0;
}

Status importance_missing(TensorType type) {
  return Status::error(std::string(type_name(type)) +
                       " needs an importance matrix: at two bits a weight and less most values land far off, and "
                       "only knowing which input channels the activations drive hard keeps the ones that matter "
                       "(revis quantize --imatrix FILE: llama.cpp's imatrix GGUF or .dat; revis imatrix makes one)");
}

// Norms, biases, the MoE router and the convolution of a recurrent layer
// (a few taps per channel, which ggml reads as F32 only) stay F32 in every
// mix.
bool is_quantized_matrix(const std::string& name, const std::vector<int64_t>& dims) {
  // Biases stay float even where they are 2-D (gpt-oss's per-expert ones).
  return dims.size() >= 2 && !contains(name, "ffn_gate_inp") && !contains(name, "_norm") &&
         !name.ends_with(".bias") && !contains(name, "ssm_conv1d");
}

TensorType fit_row_length(TensorType type, int64_t cols) {
  if (cols % type_traits(type).block_size != 0) type = fallback_for_short_rows(type);
  if (cols % type_traits(type).block_size != 0) type = TensorType::F16;
  return type;
}

}  // namespace

std::optional<QuantMix> parse_quant_mix(const std::string& name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const MixEntry& e : kMixes)
    if (upper == e.name) return e.mix;
  return std::nullopt;
}

const char* quant_mix_name(QuantMix mix) {
  for (const MixEntry& e : kMixes)
    if (e.mix == mix) return e.name;
  return "?";
}

std::string quant_mix_names() {
  std::string names;
  const size_t count = std::size(kMixes);
  for (size_t i = 0; i < count; ++i) names += std::string(i == 0 ? "" : i + 1 == count ? " or " : ", ") + kMixes[i].name;
  return names;
}

uint32_t llama_file_type(QuantMix mix) {
  for (const MixEntry& e : kMixes)
    if (e.mix == mix) return e.file_type;
  return 0;
}

Result<TensorTypeOverride> parse_tensor_type_override(const std::string& spec) {
  const size_t equals = spec.rfind('=');
  if (equals == std::string::npos || equals == 0)
    return Status::error("--tensor-type '" + spec + "': expected PATTERN=TYPE");
  TensorTypeOverride out;
  out.pattern = spec.substr(0, equals);
  const std::optional<TensorType> type = type_from_name(spec.substr(equals + 1));
  if (!type || !(can_quantize(*type) || can_quantize_with_importance(*type)))
    return Status::error("--tensor-type '" + spec + "': '" + spec.substr(equals + 1) +
                         "' is not a type revis writes (F32, F16, BF16, Q4_0 .. Q8_0, Q2_K .. Q6_K, IQ4_NL, IQ4_XS, "
                         "IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)");
  out.type = *type;
  try {
    out.regex = std::regex(out.pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return Status::error("--tensor-type '" + spec + "': pattern '" + out.pattern + "' is not a regex: " + e.what());
  }
  return out;
}

TensorType choose_tensor_type(QuantMix mix, const std::string& name, const std::vector<int64_t>& dims,
                              const TensorContext& ctx) {
  if (!is_quantized_matrix(name, dims)) return TensorType::F32;
  const bool is_output = name == "output.weight" || (ctx.output_is_tied && name == "token_embd.weight");
  const bool more_bits = (contains(name, "attn_v.") || contains(name, "ffn_down")) &&
                         layer_gets_more_bits(layer_of(name), ctx.n_layer);
  TensorType type = TensorType::F32;
  switch (mix) {
    case QuantMix::kF32: return TensorType::F32;
    case QuantMix::kF16: return TensorType::F16;
    case QuantMix::kQ8_0: return TensorType::Q8_0;
    case QuantMix::kQ4_0: type = is_output ? TensorType::Q6_K : TensorType::Q4_0; break;
    case QuantMix::kQ4_1: type = is_output ? TensorType::Q6_K : TensorType::Q4_1; break;
    case QuantMix::kQ5_0: type = is_output ? TensorType::Q6_K : TensorType::Q5_0; break;
    case QuantMix::kQ5_1: type = is_output ? TensorType::Q6_K : TensorType::Q5_1; break;
    case QuantMix::kQ6_K: type = TensorType::Q6_K; break;
    case QuantMix::kQ4_K_M: type = is_output || more_bits ? TensorType::Q6_K : TensorType::Q4_K; break;
    case QuantMix::kQ5_K_M: type = is_output || more_bits ? TensorType::Q6_K : TensorType::Q5_K; break;
    case QuantMix::kMoe2Bit: type = routed_expert_mix(name, TensorType::IQ2_XXS, TensorType::Q2_K); break;
    case QuantMix::kMoe3Bit: type = routed_expert_mix(name, TensorType::IQ3_XXS, TensorType::IQ4_XS); break;
    case QuantMix::kMxfp4Moe: type = dims.size() >= 3 && dims[2] > 1 ? TensorType::MXFP4 : TensorType::Q8_0; break;
    default: type = low_bit_type(mix, role_of(name, ctx), layer_of(name), ctx); break;
  }
  // Many experts share one attention: its K and V are worth keeping precise.
  if (ctx.n_expert >= 8 && (contains(name, "attn_k.") || contains(name, "attn_v."))) type = TensorType::Q8_0;
  else if (ctx.n_expert >= 8 && contains(name, "attn_output") && (mix == QuantMix::kQ4_K_M || is_low_bit_mix(mix)))
    type = TensorType::Q5_K;
  return fit_row_length(type, dims[0]);
}

gguf::GgufWriter::Producer quantized_rows_producer(TensorType type, int64_t n_rows, int64_t row_length,
                                                   RowSource source, ThreadPool& pool, RowImportance importance) {
  return [=, &pool](const gguf::GgufWriter::Sink& sink) -> Status {
    const bool weighted = importance && can_quantize_with_importance(type);
    if (!weighted && !can_quantize(type)) {
      if (quantize_needs_importance(type)) return importance_missing(type);
      return Status::error(std::string("revis cannot write tensors of type ") + type_name(type));
    }
    constexpr int64_t kSliceValues = int64_t{4} << 20;
    const int64_t slice_rows = std::max<int64_t>(1, kSliceValues / row_length);
    const size_t bytes_per_row = row_bytes(type, row_length);
    std::vector<float> values(static_cast<size_t>(std::min(n_rows, slice_rows) * row_length));
    std::vector<uint8_t> bytes(static_cast<size_t>(std::min(n_rows, slice_rows)) * bytes_per_row);
    for (int64_t first = 0; first < n_rows; first += slice_rows) {
      const int64_t count = std::min(slice_rows, n_rows - first);
      source(first, first + count, values.data());
      pool.parallel_for(count, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          if (weighted)
            quantize_row_with_importance(type, &values[r * row_length], &bytes[r * bytes_per_row], row_length,
                                         importance(first + r));
          else
            quantize_row(type, &values[r * row_length], &bytes[r * bytes_per_row], row_length);
        }
      });
      if (Status s = sink(bytes.data(), count * bytes_per_row); !s.ok()) return s;
    }
    return {};
  };
}

// Per row of tensor t, the imatrix's importance of its matrix (the expert
// r / rows-per-expert of a merged expert tensor), ones where the imatrix has
// no entry or the expert saw no rows; the vectors are built up front.
Result<RowImportance> row_importance(const Imatrix* imatrix, const gguf::TensorInfo& t) {
  if (imatrix == nullptr) return RowImportance{};
  const int64_t cols = t.dims[0];
  const int64_t rows_per_mat = t.dims.size() >= 2 ? t.dims[1] : 1;
  const int64_t n_mat = t.rows() / rows_per_mat;
  auto per_mat = std::make_shared<std::vector<std::vector<float>>>();
  for (int64_t m = 0; m < n_mat; ++m) {
    auto importance = imatrix->importance(t.name, cols, m);
    if (!importance.ok()) return importance.status();
    if (importance->empty()) importance->assign(static_cast<size_t>(cols), 1.0f);
    per_mat->push_back(std::move(*importance));
  }
  return RowImportance([per_mat, rows_per_mat](int64_t row) { return (*per_mat)[row / rows_per_mat].data(); });
}

Status quantize_model(const std::string& input, const std::string& output, QuantMix mix, ThreadPool& pool,
                      const QuantizeProgress& progress, const Imatrix* imatrix,
                      const std::vector<TensorTypeOverride>& overrides) {
  auto opened = gguf::GgufFile::open(input);
  if (!opened.ok()) return opened.status();
  const gguf::GgufFile& in = **opened;
  auto arch = in.get_string("general.architecture");
  if (!arch.ok()) return arch.status();
  TensorContext ctx;
  const auto int_key = [&](const std::string& key) {
    auto v = in.get_int(key, 0);
    return v.ok() ? static_cast<int>(*v) : 0;
  };
  ctx.n_layer = int_key(*arch + ".block_count");
  ctx.n_expert = int_key(*arch + ".expert_count");
  ctx.output_is_tied = in.tensor("output.weight") == nullptr;
  // head_count_kv may be an array (per layer); it then reads as 0 and 1 is assumed.
  const int n_head_kv = int_key(*arch + ".attention.head_count_kv");
  ctx.n_gqa = n_head_kv > 0 ? int_key(*arch + ".attention.head_count") / n_head_kv : 1;
  ctx.has_imatrix = imatrix != nullptr;

  gguf::GgufWriter out;
  out.copy_metadata(in);
  out.set_u32("general.file_type", llama_file_type(mix));
  out.set_u32("general.quantization_version", 2);
  // Tensors are converted while the file is written, one slice at a time;
  // the input stays mapped until then.
  const size_t n_tensors = in.tensors().size();
  for (size_t i = 0; i < n_tensors; ++i) {
    const gguf::TensorInfo& t = in.tensors()[i];
    TensorType target = choose_tensor_type(mix, t.name, t.dims, ctx);
    for (const TensorTypeOverride& o : overrides) {
      if (!is_quantized_matrix(t.name, t.dims) || !std::regex_search(t.name, o.regex)) continue;
      target = fit_row_length(o.type, t.dims[0]);
      break;
    }
    if (t.type == TensorType::I32) target = t.type;  // a table (deepseek4's hash routing), not weights
    gguf::GgufWriter::Producer produce;
    size_t n_bytes = t.n_bytes;
    if (target == t.type) {
      produce = [&t](const gguf::GgufWriter::Sink& sink) { return sink(t.data, t.n_bytes); };
    } else {
      if (!can_dequantize(t.type)) return Status::error(input + ": tensor '" + t.name + "' has type " +
                                                        type_name(t.type) + ", which cannot be converted");
      const int64_t cols = t.dims[0];
      const size_t in_row = row_bytes(t.type, cols);
      // Refused before anything is written.
      if (imatrix == nullptr && quantize_needs_importance(target)) return importance_missing(target).with_context(t.name);
      auto importance = row_importance(imatrix, t);
      if (!importance.ok()) return importance.status().with_context(input);
      n_bytes = row_bytes(target, t.n_elements());
      produce = quantized_rows_producer(
          target, t.rows(), cols,
          [&t, cols, in_row](int64_t begin, int64_t end, float* values) {
            for (int64_t r = begin; r < end; ++r) dequantize_row(t.type, t.data + r * in_row, &values[(r - begin) * cols], cols);
          },
          pool, *importance);
    }
    auto with_progress = [i, n_tensors, &t, &progress, produce](const gguf::GgufWriter::Sink& sink) {
      if (progress) progress(i, n_tensors, t.name);
      return produce(sink);
    };
    if (Status s = out.add_tensor_producer(t.name, target, t.dims, n_bytes, with_progress); !s.ok())
      return s.with_context(output);
  }
  Status written = out.write(output);
  if (written.ok() && progress) progress(n_tensors, n_tensors, "");
  return written;
}

}  // namespace revis
