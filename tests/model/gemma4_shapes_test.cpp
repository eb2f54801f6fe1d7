// Gemma 4's published shapes (mkmodel --like gemma-4-e2b, -e4b, -26b-a4b,
// -31b): their sizes are the published parameter counts, --layers keeps a
// valid share of cache-sharing layers, their files carry the keys and
// tensors llama.cpp's converter writes, and revis runs such a file or
// refuses it by the key it cannot take yet.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "gguf/gguf.h"
#include "support/synthetic_file.h"
#include "support/testdata.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::load_error;
using testing::TempDir;

SyntheticSpec preset(const std::string& name) {
  std::optional<SyntheticSpec> spec = synthetic_preset(name);
  EXPECT_TRUE(spec.has_value()) << name;
  return spec.value_or(SyntheticSpec{});
}

// Billions of parameters (F32 bytes / 4) of a preset: all of them, and
// those a token reads as the model cards count them (the embedding table
// once, where the size counts one row of it), both beside the per-layer
// embedding table.
struct Billions {
  double total, active;
};
Billions parameters(const std::string& name) {
  SyntheticSpec spec = preset(name);
  spec.mix = QuantMix::kF32;
  auto size = synthetic_model_size(spec);
  EXPECT_TRUE(size.ok()) << size.status().message();
  if (!size.ok()) return {};
  const double embedding = 262144.0 * spec.n_embd / 1e9;
  const double per_layer_table = 262144.0 * spec.n_embd_per_layer * spec.n_layer / 1e9;
  return {static_cast<double>(size->tensor_bytes) / 4e9 - per_layer_table,
          static_cast<double>(size->bytes_per_token) / 4e9 + embedding};
}

// Google's model cards: 26B-A4B 25.2B (3.8B active), 31B 30.7B, and the
// "effective" parameters of E2B and E4B (those beside the per-layer
// embedding table) 2.3B and 4.5B.
TEST(Gemma4Shapes, SizesAreThePublishedParameterCounts) {
  const Billions moe = parameters("gemma-4-26b-a4b");
  EXPECT_NEAR(moe.total, 25.2, 0.25);
  EXPECT_NEAR(moe.active, 3.8, 0.08);
  const Billions dense = parameters("gemma-4-31b");
  EXPECT_NEAR(dense.total, 30.7, 0.3);
  EXPECT_NEAR(dense.active, 30.7, 0.3);
  EXPECT_NEAR(parameters("gemma-4-e2b").total, 2.3, 0.15);
  EXPECT_NEAR(parameters("gemma-4-e4b").total, 4.5, 0.15);
}

// --layers keeps the shared layers after a whole local-then-global group.
TEST(Gemma4Shapes, FewerLayersKeepAValidShareOfSharedOnes) {
  EXPECT_EQ(with_layers(preset("gemma-4-e2b"), 10).shared_kv_layers, 5);  // 4 local + 1 global, twice
  EXPECT_EQ(with_layers(preset("gemma-4-e2b"), 6).shared_kv_layers, 1);
  EXPECT_EQ(with_layers(preset("gemma-4-e2b"), 5).shared_kv_layers, 0);
  EXPECT_EQ(with_layers(preset("gemma-4-e4b"), 12).shared_kv_layers, 0);
  EXPECT_EQ(with_layers(preset("gemma-4-e4b"), 18).shared_kv_layers, 6);
  EXPECT_EQ(with_layers(preset("gemma-4-31b"), 6).shared_kv_layers, 0);
}

// Each shape at 6 layers (widths cut where the file would be large): the
// keys and tensors of the published files, and revis either runs it or
// names the key it cannot take yet (two head widths, per-layer KV heads).
TEST(Gemma4Shapes, FilesCarryThePublishedLayout) {
  for (const char* name : {"gemma-4-e2b", "gemma-4-e4b", "gemma-4-26b-a4b", "gemma-4-31b"}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    SyntheticSpec spec = with_layers(preset(name), 6);
    spec.n_vocab = 300;
    spec.n_embd = 256;
    spec.n_ff = 512;
    if (spec.n_expert > 0) spec.n_expert = 8, spec.n_expert_used = 2, spec.n_ff_expert = 64;
    const std::string path = testing::write_synthetic(tmp, spec);
    auto file = gguf::GgufFile::open(path);
    ASSERT_TRUE(file.ok());
    const gguf::GgufFile& f = **file;
    EXPECT_EQ(f.get_int("gemma4.attention.key_length", 0).value(), 512);
    EXPECT_EQ(f.get_int("gemma4.attention.key_length_swa", 0).value(), 256);
    // Layer 5 is global (every 5th in E2B, every 6th in the others).
    const int global = spec.sliding_pattern - 1;
    const std::string g = "blk." + std::to_string(global) + ".";
    ASSERT_NE(f.tensor(g + "attn_q.weight"), nullptr);
    EXPECT_EQ(f.tensor(g + "attn_q.weight")->dims[1], int64_t{spec.n_head} * 512);
    EXPECT_EQ(f.tensor("rope_freqs.weight")->dims[0], 256);
    const bool k_eq_v = spec.global_k_eq_v;
    EXPECT_EQ(f.tensor(g + "attn_v.weight") == nullptr, k_eq_v);
    EXPECT_NE(f.tensor("blk.0.attn_v.weight"), nullptr);
    if (spec.n_head_kv_global > 0) {
      auto heads = f.get_int_array("gemma4.attention.head_count_kv");
      ASSERT_TRUE(heads.ok()) << heads.status().message();
      EXPECT_EQ((*heads)[0], spec.n_head_kv);
      EXPECT_EQ((*heads)[global], spec.n_head_kv_global);
    }
    if (spec.double_wide_shared_ffn) {
      auto widths = f.get_int_array("gemma4.feed_forward_length");
      ASSERT_TRUE(widths.ok()) << widths.status().message();
      EXPECT_EQ(widths->back(), 2 * spec.n_ff);
    }
    if (spec.fused_gate_up_exps) {
      EXPECT_NE(f.tensor("blk.0.ffn_gate_up_exps.weight"), nullptr);
    }
    const std::string error = load_error(path);
    if (error != "loaded") {
      EXPECT_TRUE(error.find("gemma4.attention.key_length_swa") != std::string::npos ||
                  error.find("gemma4.attention.head_count_kv") != std::string::npos)
          << error;
    }
  }
}

}  // namespace
}  // namespace revis
