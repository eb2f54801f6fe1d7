// The low-bit mixes of `revis quantize` (Q2_K, Q3_K_S/M/L, IQ2_XS, IQ3_XXS,
// IQ3_S, IQ4_XS): which tensor gets which type, and that a synthetic model
// quantized to each still runs with logits close to its F16 original's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "revis/engine.h"
#include "support/testdata.h"
#include "tools/imatrix_file.h"
#include "tools/quantize.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::TempDir;

// Spot checks of llama.cpp's rules (llama-quant.cpp) for a 32-layer model
// with grouped-query attention of 4 (n_gqa >= 4 upgrades attn_v).
TEST(QuantizeMixes, FollowLlamaCppsRules) {
  const TensorContext gqa{.n_layer = 32, .n_gqa = 4};
  const TensorContext mha{.n_layer = 32, .n_gqa = 1};
  const TensorContext with_imatrix{.n_layer = 32, .n_gqa = 4, .has_imatrix = true};
  const TensorContext moe{.n_layer = 32, .n_expert = 8, .n_gqa = 4};
  using T = TensorType;
  struct Case {
    QuantMix mix;
    const char* name;
    TensorContext ctx;
    int64_t cols;  // row length: 4096 + 32 is not whole 256-blocks
    TensorType expected;
  };
  const Case cases[] = {
      {QuantMix::kQ2_K, "blk.3.ffn_up.weight", gqa, 4096, T::Q2_K},
      {QuantMix::kQ2_K, "blk.3.ffn_down.weight", gqa, 4096, T::Q3_K},
      {QuantMix::kQ2_K, "blk.3.attn_v.weight", gqa, 4096, T::Q4_K},
      {QuantMix::kQ2_K, "blk.3.attn_v.weight", mha, 4096, T::Q3_K},
      {QuantMix::kQ2_K, "blk.3.attn_output.weight", gqa, 4096, T::Q3_K},
      {QuantMix::kQ2_K, "output.weight", gqa, 4096, T::Q6_K},
      {QuantMix::kQ3_K_S, "blk.0.attn_v.weight", gqa, 4096, T::Q3_K},
      {QuantMix::kQ3_K_S, "blk.0.ffn_down.weight", gqa, 4096, T::Q3_K},
      {QuantMix::kQ3_K_M, "blk.1.attn_v.weight", gqa, 4096, T::Q5_K},
      {QuantMix::kQ3_K_M, "blk.2.attn_v.weight", gqa, 4096, T::Q4_K},
      {QuantMix::kQ3_K_M, "blk.1.ffn_down.weight", gqa, 4096, T::Q5_K},  // first sixteenth
      {QuantMix::kQ3_K_M, "blk.2.ffn_down.weight", gqa, 4096, T::Q4_K},
      {QuantMix::kQ3_K_M, "blk.2.attn_output.weight", gqa, 4096, T::Q4_K},
      {QuantMix::kQ3_K_M, "blk.2.attn_q.weight", gqa, 4096, T::Q3_K},
      {QuantMix::kQ3_K_L, "blk.9.attn_v.weight", gqa, 4096, T::Q5_K},
      {QuantMix::kQ3_K_L, "blk.9.ffn_down.weight", gqa, 4096, T::Q5_K},
      {QuantMix::kQ3_K_L, "blk.9.attn_output.weight", gqa, 4096, T::Q5_K},
      {QuantMix::kQ3_K_L, "blk.9.ffn_gate.weight", gqa, 4096, T::Q3_K},
      {QuantMix::kIQ2_XS, "blk.3.ffn_down.weight", gqa, 4096, T::Q2_K},  // first eighth
      {QuantMix::kIQ2_XS, "blk.4.ffn_down.weight", gqa, 4096, T::IQ2_XS},
      {QuantMix::kIQ2_XS, "token_embd.weight", gqa, 4096, T::Q2_K},
      {QuantMix::kIQ2_XS, "output.weight", gqa, 4096, T::Q5_K},
      {QuantMix::kIQ3_XXS, "blk.0.ffn_down.weight", gqa, 4096, T::Q4_K},
      {QuantMix::kIQ3_XXS, "blk.9.ffn_down.weight", gqa, 4096, T::Q3_K},
      {QuantMix::kIQ3_XXS, "blk.9.ffn_down.weight", with_imatrix, 4096, T::IQ3_XXS},
      {QuantMix::kIQ3_XXS, "blk.9.attn_output.weight", gqa, 4096, T::IQ3_S},
      {QuantMix::kIQ3_XXS, "blk.9.attn_q.weight", with_imatrix, 4096, T::IQ2_S},
      {QuantMix::kIQ3_XXS, "blk.9.attn_q.weight", gqa, 4096, T::IQ3_XXS},
      {QuantMix::kIQ3_S, "blk.9.ffn_up.weight", gqa, 4096, T::IQ3_S},
      {QuantMix::kIQ4_XS, "blk.9.attn_v.weight", gqa, 4096, T::Q5_K},
      {QuantMix::kIQ4_XS, "blk.0.ffn_down.weight", gqa, 4096, T::Q5_K},
      {QuantMix::kIQ4_XS, "blk.0.ffn_down.weight", with_imatrix, 4096, T::IQ4_XS},
      // Short rows fall back to 32-blocks; MoE attention is kept precise.
      {QuantMix::kQ3_K_S, "blk.0.ffn_up.weight", gqa, 4096 + 32, T::Q4_0},
      {QuantMix::kIQ3_S, "blk.0.ffn_up.weight", gqa, 4096 + 32, T::IQ4_NL},
      {QuantMix::kQ3_K_S, "blk.0.attn_k.weight", moe, 4096, T::Q8_0},
      {QuantMix::kQ3_K_S, "blk.0.attn_output.weight", moe, 4096, T::Q5_K},
      // The MoE mixes: routed experts low, everything else Q8_0.
      {QuantMix::kMoe2Bit, "blk.3.ffn_gate_exps.weight", moe, 4096, T::IQ2_XXS},
      {QuantMix::kMoe2Bit, "blk.3.ffn_down_exps.weight", moe, 4096, T::Q2_K},
      {QuantMix::kMoe3Bit, "blk.3.ffn_up_exps.weight", moe, 4096, T::IQ3_XXS},
      {QuantMix::kMoe3Bit, "blk.3.ffn_down_exps.weight", moe, 4096, T::IQ4_XS},
      {QuantMix::kMoe3Bit, "blk.3.ffn_down_shexp.weight", moe, 4096, T::Q8_0},
      {QuantMix::kMoe3Bit, "blk.3.attn_output.weight", moe, 4096, T::Q8_0},
      {QuantMix::kMoe3Bit, "output.weight", moe, 4096, T::Q8_0},
      {QuantMix::kMoe3Bit, "blk.3.ffn_gate_inp.weight", moe, 4096, T::F32},
  };
  for (const Case& c : cases)
    EXPECT_EQ(type_name(choose_tensor_type(c.mix, c.name, {c.cols, 4096}, c.ctx)), std::string(type_name(c.expected)))
        << quant_mix_name(c.mix) << " " << c.name;
  // MXFP4_MOE goes by shape, as llama.cpp's mix of that name does: every
  // stack of experts MXFP4, whatever its name; the rest Q8_0, biases F32.
  EXPECT_EQ(choose_tensor_type(QuantMix::kMxfp4Moe, "blk.0.ffn_gate_up_exps.weight", {2880, 5760, 32}, moe), T::MXFP4);
  EXPECT_EQ(choose_tensor_type(QuantMix::kMxfp4Moe, "blk.0.ffn_down_exps.weight", {2880, 2880, 32}, moe), T::MXFP4);
  EXPECT_EQ(choose_tensor_type(QuantMix::kMxfp4Moe, "blk.0.attn_q.weight", {2880, 4096}, moe), T::Q8_0);
  EXPECT_EQ(choose_tensor_type(QuantMix::kMxfp4Moe, "output.weight", {2880, 201088}, moe), T::Q8_0);
  EXPECT_EQ(choose_tensor_type(QuantMix::kMxfp4Moe, "blk.0.ffn_down_exps.bias", {2880, 32}, moe), T::F32);
  EXPECT_EQ(std::string(quant_mix_name(*parse_quant_mix("mxfp4_moe"))), "MXFP4_MOE");
  EXPECT_EQ(llama_file_type(QuantMix::kMxfp4Moe), 38u);
}

// A small llama-shaped model with random weights.
SyntheticSpec small_model() {
  SyntheticSpec spec;
  spec.n_embd = 256;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_head_kv = 1;
  spec.n_ff = 256;
  spec.n_vocab = 320;
  return spec;
}

// All logits of `tokens`, one row per position.
std::vector<float> all_logits(const std::string& model, const std::vector<int32_t>& tokens) {
  auto engine = Engine::load({.model_path = model, .n_ctx = 64, .n_threads = 2});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {};
  auto session = (*engine)->new_session();
  Status s = session->eval(tokens, /*all_logits=*/true);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<float> out;
  for (size_t k = 0; k < tokens.size(); ++k) {
    const auto row = session->logits(static_cast<int>(k));
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

double relative_rms(const std::vector<float>& ours, const std::vector<float>& reference) {
  double error = 0, norm = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    error += (static_cast<double>(ours[i]) - reference[i]) * (static_cast<double>(ours[i]) - reference[i]);
    norm += static_cast<double>(reference[i]) * reference[i];
  }
  return std::sqrt(error / norm);
}

// The small model, quantized to each mix
// (IQ2_XS with an importance matrix of ones: it refuses to run without
// one), runs, and its logits stay within rms(F16 logits) times the bound.
// Bounds: the measured error plus about 25 % (the mixes differ by their bit
// counts, from IQ2_XS's 2.3 bits a weight to IQ4_XS's 4.25); a broken
// quantizer or a mix that picks a type wrongly lands far outside. For
// scale, the same model with other random weights is off by about 1.4
// (sqrt 2: unrelated logits of equal rms), and every mix must stay under
// half of that.
TEST(QuantizeMixes, SyntheticModelRunsCloseToF16) {
  const SyntheticSpec spec = small_model();
  TempDir tmp;
  ThreadPool pool(2);
  const std::string f16 = tmp.file("f16.gguf");
  ASSERT_TRUE(write_synthetic_model(spec, f16, pool, nullptr).ok());
  const std::vector<int32_t> tokens = {1, 50, 300, 7, 42, 99, 260, 3};
  const std::vector<float> reference = all_logits(f16, tokens);
  ASSERT_FALSE(reference.empty());
  SyntheticSpec other = spec;
  other.seed = 2;
  ASSERT_TRUE(write_synthetic_model(other, tmp.file("other.gguf"), pool, nullptr).ok());
  const double unrelated = relative_rms(all_logits(tmp.file("other.gguf"), tokens), reference);
  std::printf("another random model: logits' rms error against F16 %.4f of their rms\n", unrelated);

  const Imatrix ones;  // no entries: every channel weighs 1
  const std::map<QuantMix, double> bounds = {
      // measured: Q2_K 0.483, Q3_K_S 0.324, Q3_K_M 0.259, Q3_K_L 0.253,
      // IQ2_XS 0.533, IQ3_XXS 0.333, IQ3_S 0.291, IQ4_XS 0.155
      {QuantMix::kQ2_K, 0.60},   {QuantMix::kQ3_K_S, 0.40},  {QuantMix::kQ3_K_M, 0.33}, {QuantMix::kQ3_K_L, 0.32},
      {QuantMix::kIQ2_XS, 0.67}, {QuantMix::kIQ3_XXS, 0.42}, {QuantMix::kIQ3_S, 0.37}, {QuantMix::kIQ4_XS, 0.20},
  };
  for (const auto& [mix, bound] : bounds) {
    const std::string out = tmp.file(std::string(quant_mix_name(mix)) + ".gguf");
    Status s = quantize_model(f16, out, mix, pool, nullptr, mix == QuantMix::kIQ2_XS ? &ones : nullptr);
    ASSERT_TRUE(s.ok()) << quant_mix_name(mix) << ": " << s.message();
    const double error = relative_rms(all_logits(out, tokens), reference);
    std::printf("%s: logits' rms error against F16 %.4f of their rms\n", quant_mix_name(mix), error);
    EXPECT_LE(error, bound) << quant_mix_name(mix);
    EXPECT_LT(error, 0.5 * unrelated) << quant_mix_name(mix);
  }
}

TEST(QuantizeMixes, Iq2XsRefusesWithoutAnImportanceMatrix) {
  SyntheticSpec spec;
  spec.n_vocab = 512;
  TempDir tmp;
  ThreadPool pool(1);
  ASSERT_TRUE(write_synthetic_model(spec, tmp.file("f16.gguf"), pool, nullptr).ok());
  Status s = quantize_model(tmp.file("f16.gguf"), tmp.file("out.gguf"), QuantMix::kIQ2_XS, pool, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("IQ2_XS needs an importance matrix"), std::string::npos) << s.message();
}

// Synthetic files in a mix whose types need an importance matrix are
// written without one (random weights have no activations to weigh), and
// run as close to their F16 twin as a quantized file of that mix.
TEST(QuantizeMixes, SyntheticFilesTakeTheImportanceMixesDirectly) {
  TempDir tmp;
  ThreadPool pool(2);
  SyntheticSpec spec = small_model();
  ASSERT_TRUE(write_synthetic_model(spec, tmp.file("f16.gguf"), pool, nullptr).ok());
  spec.mix = QuantMix::kIQ2_XS;
  Status s = write_synthetic_model(spec, tmp.file("iq2.gguf"), pool, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<int32_t> tokens = {1, 50, 300, 7};
  const double error = relative_rms(all_logits(tmp.file("iq2.gguf"), tokens), all_logits(tmp.file("f16.gguf"), tokens));
  std::printf("synthetic IQ2_XS: logits' rms error against F16 %.4f of their rms\n", error);
  EXPECT_LE(error, 0.67) << "the bound of a quantized IQ2_XS file (SyntheticModelRunsCloseToF16)";
}

// IQ2_S, IQ1_S and IQ1_M through --tensor-type: refused without an
// importance matrix, saying why; with one (in ffn_down), the model runs
// close to its F16 original.
TEST(QuantizeMixes, LowestBitGridTypesNeedAnImportanceMatrix) {
  TempDir tmp;
  ThreadPool pool(2);
  const std::string f16 = tmp.file("f16.gguf");
  ASSERT_TRUE(write_synthetic_model(small_model(), f16, pool, nullptr).ok());
  const std::vector<int32_t> tokens = {1, 50, 300, 7, 42, 99};
  const std::vector<float> reference = all_logits(f16, tokens);
  const Imatrix ones;
  for (const char* type : {"IQ2_S", "IQ1_S", "IQ1_M"}) {
    auto parsed = parse_tensor_type_override(std::string("ffn_down=") + type);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    const std::vector<TensorTypeOverride> overrides = {std::move(*parsed)};
    const std::string out = tmp.file(std::string(type) + ".gguf");
    const Status refused = quantize_model(f16, out, QuantMix::kQ8_0, pool, nullptr, nullptr, overrides);
    ASSERT_FALSE(refused.ok()) << type;
    EXPECT_NE(refused.message().find(std::string(type) + " needs an importance matrix: at two bits"), std::string::npos)
        << refused.message();
    ASSERT_TRUE(quantize_model(f16, out, QuantMix::kQ8_0, pool, nullptr, &ones, overrides).ok()) << type;
    auto file = gguf::GgufFile::open(out);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(type_name((*file)->tensor("blk.0.ffn_down.weight")->type), std::string(type));
    const double error = relative_rms(all_logits(out, tokens), reference);
    std::printf("%s ffn_down: logits' rms error against F16 %.4f of their rms\n", type, error);
    EXPECT_LT(error, 0.35) << type;  // measured 0.14 (IQ2_S) to 0.25 (IQ1_S); unrelated weights: 1.4
  }
}

// --tensor-type: the first matching pattern wins, over matrices only, with
// the mix's fallback for short rows; bad specs are refused saying why.
TEST(QuantizeMixes, TensorTypeOverridesTakePrecedence) {
  SyntheticSpec spec;
  spec.n_vocab = 320;
  spec.n_ff = 256 + 32;  // ffn_down's rows are not whole 256-blocks
  TempDir tmp;
  ThreadPool pool(2);
  ASSERT_TRUE(write_synthetic_model(spec, tmp.file("f16.gguf"), pool, nullptr).ok());
  std::vector<TensorTypeOverride> overrides;
  for (const char* text : {"attn_v=Q8_0", "blk\\.1\\.ffn=Q3_K", "ffn_(up|down)=Q6_K", "norm=Q4_0"}) {
    auto parsed = parse_tensor_type_override(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    overrides.push_back(std::move(*parsed));
  }
  ASSERT_TRUE(quantize_model(tmp.file("f16.gguf"), tmp.file("q.gguf"), QuantMix::kQ4_0, pool, nullptr, nullptr,
                             overrides)
                  .ok());
  auto file = gguf::GgufFile::open(tmp.file("q.gguf"));
  ASSERT_TRUE(file.ok());
  const std::map<std::string, TensorType> expected = {
      {"blk.0.attn_v.weight", TensorType::Q8_0},   {"blk.0.attn_q.weight", TensorType::Q4_0},
      {"blk.1.ffn_up.weight", TensorType::Q3_K},   {"blk.1.ffn_down.weight", TensorType::Q4_0},  // Q3_K's fallback
      {"blk.0.ffn_up.weight", TensorType::Q6_K},   {"blk.0.ffn_down.weight", TensorType::Q8_0},  // Q6_K's fallback
      {"blk.0.ffn_gate.weight", TensorType::Q4_0}, {"blk.0.attn_norm.weight", TensorType::F32},
  };
  for (const auto& [name, type] : expected) {
    const gguf::TensorInfo* t = (*file)->tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(type_name(t->type), std::string(type_name(type))) << name;
  }
  for (const char* bad : {"attn_v", "=Q8_0", "attn_v=Q9_9", "attn_v=Q8_1", "attn_(v=Q8_0"}) {
    auto parsed = parse_tensor_type_override(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find(bad), std::string::npos) << parsed.status().message();
  }
}

}  // namespace
}  // namespace revis
