// Converting a model file to another tensor type mix (`revis quantize`), and
// the rule that picks each tensor's type, shared with `revis mkmodel`.
//
// The mixes (docs/formats.md has the table):
//   F16, Q8_0, Q6_K         every matrix in that type
//   Q4_0, Q4_1, Q5_0, Q5_1  every matrix in that type but the output, in Q6_K
//   Q4_K_M, Q5_K_M          Q4_K / Q5_K, with output.weight, and attn_v and
//                           ffn_down in the first and last eighth of the layers
//                           and every third layer between, in Q6_K
//   Q2_K, Q3_K_S, Q3_K_M,   llama.cpp's mixes of those names: the base type,
//   Q3_K_L, IQ2_XS,         with output, attn_v, attn_output, ffn_down (and
//   IQ3_XXS, IQ3_S, IQ4_XS  for some token_embd, attn_q, attn_k) in other
//                           types by llama.cpp's rules (docs/quantization.md);
//                           IQ2_XS needs an importance matrix
//   MOE-2BIT                ds4's mix for MoE models: routed experts' gate and
//                           up IQ2_XXS, down Q2_K, every other matrix Q8_0;
//                           needs an importance matrix (IQ2_XXS)
//   MOE-3BIT                the same shape a step up: routed experts' gate
//                           and up IQ3_XXS, down IQ4_XS, the rest Q8_0
//   MXFP4_MOE               gpt-oss's published form, llama.cpp's mix of that
//                           name: every expert stack (a 3-D tensor) MXFP4,
//                           every other matrix Q8_0
// Always: 1-D tensors (norms, biases, RoPE factors) and the MoE router stay
// F32; in models with 8 or more experts attn_k and attn_v are Q8_0, and
// attn_output Q5_K in the mixes of four bits and less. A type on a row
// length that is not a multiple of its block falls back to a 32-block type
// of similar size (Q2_K, Q3_K->Q4_0, Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0,
// the IQ types->IQ4_NL), or F16. The IQ1 and IQ2 types need an importance
// matrix; given to --tensor-type without one, quantizing is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/thread_pool.h"
#include "quant/types.h"
#include "revis/status.h"

namespace revis {

enum class QuantMix {
  kF32, kF16, kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ4_K_M, kQ5_K_M, kQ6_K,
  kQ2_K, kQ3_K_S, kQ3_K_M, kQ3_K_L, kIQ2_XS, kIQ3_XXS, kIQ3_S, kIQ4_XS, kMoe2Bit, kMoe3Bit, kMxfp4Moe,
};

std::optional<QuantMix> parse_quant_mix(const std::string& name);  // case-insensitive
const char* quant_mix_name(QuantMix mix);
std::string quant_mix_names();  // every mix, "F32, F16, ... or Q6_K", for messages
uint32_t llama_file_type(QuantMix mix);  // general.file_type

// What the rule needs to know about the model around one tensor.
struct TensorContext {
  int n_layer = 0;
  int n_expert = 0;
  bool output_is_tied = false;  // token_embd doubles as the output matrix
  int n_gqa = 1;                // query heads per key/value head
  bool has_imatrix = false;     // the quantizers will get importance
};

// The type tensor `name` with dims (innermost first) gets under `mix`.
TensorType choose_tensor_type(QuantMix mix, const std::string& name, const std::vector<int64_t>& dims,
                              const TensorContext& context);

// `--tensor-type PATTERN=TYPE`: every matrix whose name PATTERN (an
// ECMAScript regex) matches anywhere gets TYPE instead of the mix's choice;
// the first matching override wins. Like the mix's own types, it applies
// to matrices only (not norms, biases or the router), and a row length
// TYPE's blocks do not divide falls back as the mix's would.
struct TensorTypeOverride {
  std::string pattern;
  std::regex regex;
  TensorType type = TensorType::F32;
};
// Parses "PATTERN=TYPE" (split at the last '='); an error names what is wrong.
Result<TensorTypeOverride> parse_tensor_type_override(const std::string& spec);

// Reports (tensors done, tensors total, current tensor name).
using QuantizeProgress = std::function<void(size_t, size_t, const std::string&)>;

struct Imatrix;

// Reads `input`, writes `output` with every tensor converted per the rule.
// `imatrix` (may be null) weighs the errors of the types that take one; a
// mix with a type that needs one (MOE-2BIT) is refused without it.
Status quantize_model(const std::string& input, const std::string& output, QuantMix mix, ThreadPool& pool,
                      const QuantizeProgress& progress, const Imatrix* imatrix = nullptr,
                      const std::vector<TensorTypeOverride>& overrides = {});

// Writes float rows [begin, end) of a tensor into `values` (row-major).
using RowSource = std::function<void(int64_t begin, int64_t end, float* values)>;

// The importance of row r's row_length values, for the types quantized
// with one (quant.h's quantize_row_with_importance).
using RowImportance = std::function<const float*(int64_t row)>;

// A GgufWriter producer for a tensor of n_rows rows of row_length values
// converted to `type`: it asks `source` for a slice of rows at a time
// (about 16 MiB of floats), quantizes them across the pool and hands the
// bytes on, so memory stays at one slice whatever the tensor's size. A
// type that needs importance and gets none fails with an error saying so.
gguf::GgufWriter::Producer quantized_rows_producer(TensorType type, int64_t n_rows, int64_t row_length,
                                                   RowSource source, ThreadPool& pool,
                                                   RowImportance importance = nullptr);

}  // namespace revis
