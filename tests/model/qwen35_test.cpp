// qwen35's keys are read (the gated delta-net's shape, which layers recur,
// M-RoPE sections), and hostile files are refused by name (a convolution of
// 0 taps, a state that overflows, missing or misshapen tensors).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/config.h"
#include "revis/engine.h"
#include "support/gguf_copy.h"
#include "support/synthetic_file.h"
#include "support/testdata.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::load_error;
using testing::TempDir;

// The qwen35-tiny miniature: layers 0-2 recurrent, 3 attention.
std::string write_model(const TempDir& tmp) {
  std::optional<SyntheticSpec> spec = synthetic_preset("qwen35-tiny");
  EXPECT_TRUE(spec.has_value());
  spec->n_vocab = 300;
  return testing::write_synthetic(tmp, *spec);
}

bool keep(const gguf::TensorInfo&, std::vector<int64_t>&, std::vector<uint8_t>&, gguf::GgufWriter&) { return true; }

// A copy of the model with `metadata` changed, and the error loading it.
std::string error_with(const TempDir& tmp, const std::function<void(gguf::GgufWriter&)>& metadata) {
  testing::write_gguf_copy(write_model(tmp), tmp.file("bad.gguf"), keep, metadata);
  return load_error(tmp.file("bad.gguf"));
}

TEST(Qwen35Loader, ReadsItsKeys) {
  TempDir tmp;
  auto file = gguf::GgufFile::open(write_model(tmp));
  ASSERT_TRUE(file.ok());
  auto c = read_model_config(**file);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Architecture::kQwen35);
  EXPECT_TRUE(c->is_hybrid());
  const GatedDeltaNet& g = c->delta_net;
  EXPECT_EQ(g.conv_kernel, 4);
  EXPECT_EQ(g.head_dim, 32);
  EXPECT_EQ(g.k_heads, 2);
  EXPECT_EQ(g.v_heads, 4);
  EXPECT_EQ(g.conv_channels(), 2 * 2 * 32 + 4 * 32);
  EXPECT_EQ(g.recurrent, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(c->n_kv_layer(), 1);
  EXPECT_EQ(c->kv_layer(3), 0);
  EXPECT_EQ(c->n_recurrent_layer(), 3);
  EXPECT_EQ(c->rope_dims, 16);
  EXPECT_EQ(std::vector<int>(c->rope_sections, c->rope_sections + 4), (std::vector<int>{3, 2, 2, 1}));
  EXPECT_EQ(c->rope_layout, RopeLayout::kNeox);
  EXPECT_TRUE(c->has_qk_norm);
  EXPECT_EQ(load_error(tmp.file("good.gguf")), "loaded");
}

TEST(Qwen35Loader, ReadsWhichLayersRecurFromTheFile) {
  TempDir tmp;
  testing::write_gguf_copy(write_model(tmp), tmp.file("flags.gguf"), keep, [](gguf::GgufWriter& out) {
    out.set_i32_array("qwen35.attention.recurrent_layers", {1, 1, 1, 0});
    out.set_u32("qwen35.full_attention_interval", 2);  // the flags win
  });
  auto file = gguf::GgufFile::open(tmp.file("flags.gguf"));
  ASSERT_TRUE(file.ok());
  auto c = read_model_config(**file);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->delta_net.recurrent, (std::vector<bool>{true, true, true, false}));
}

TEST(Qwen35Loader, RefusesAConvolutionOfNoTaps) {
  TempDir tmp;
  const std::string error = error_with(tmp, [](gguf::GgufWriter& out) { out.set_u32("qwen35.ssm.conv_kernel", 0); });
  EXPECT_NE(error.find("bad.gguf"), std::string::npos) << error;
  EXPECT_NE(error.find("qwen35.ssm.conv_kernel: 0"), std::string::npos) << error;
}

TEST(Qwen35Loader, RefusesAStateThatOverflows) {
  TempDir tmp;
  // 1024 x 1024 floats for each of 512 heads: 2 GiB per layer.
  std::string error = error_with(tmp, [](gguf::GgufWriter& out) {
    out.set_u32("qwen35.ssm.state_size", 1024);
    out.set_u32("qwen35.ssm.time_step_rank", 512);
    out.set_u32("qwen35.ssm.inner_size", 1024 * 512);
  });
  EXPECT_NE(error.find("qwen35.ssm.state_size: 1024 x 1024 x 512 heads"), std::string::npos) << error;
  error = error_with(tmp, [](gguf::GgufWriter& out) { out.set_u32("qwen35.ssm.state_size", 0xffffffffu); });
  EXPECT_NE(error.find("qwen35.ssm.state_size"), std::string::npos) << error;
  EXPECT_EQ(error.find("loaded"), std::string::npos);
}

TEST(Qwen35Loader, RefusesInconsistentHeads) {
  TempDir tmp;
  std::string error = error_with(tmp, [](gguf::GgufWriter& out) { out.set_u32("qwen35.ssm.group_count", 3); });
  EXPECT_NE(error.find("qwen35.ssm.group_count: 3 does not divide ssm.time_step_rank 4"), std::string::npos) << error;
  error = error_with(tmp, [](gguf::GgufWriter& out) { out.set_u32("qwen35.ssm.inner_size", 100); });
  EXPECT_NE(error.find("qwen35.ssm.inner_size: 100 (expected ssm.state_size x ssm.time_step_rank = 128)"),
            std::string::npos)
      << error;
  error = error_with(tmp, [](gguf::GgufWriter& out) {
    out.set_i32_array("qwen35.rope.dimension_sections", {8, 8, 8, 0});
  });
  EXPECT_NE(error.find("qwen35.rope.dimension_sections: they sum to 24"), std::string::npos) << error;
}

TEST(Qwen35Loader, NamesAMissingTensor) {
  TempDir tmp;
  testing::expect_missing_tensors_named(
      write_model(tmp), {"blk.0.ssm_a", "blk.1.ssm_conv1d.weight", "blk.2.attn_gate.weight", "blk.0.ssm_dt.bias",
                         "blk.3.attn_q_norm.weight", "blk.1.post_attention_norm.weight", "blk.2.ssm_norm.weight"});
}

TEST(Qwen35Loader, NamesAMisshapenTensor) {
  TempDir tmp;
  testing::write_gguf_reshaped(write_model(tmp), tmp.file("bad.gguf"), "blk.1.ssm_conv1d.weight", {3, 256},
                               3 * 256 * sizeof(float));
  const std::string error = load_error(tmp.file("bad.gguf"));
  EXPECT_NE(error.find("tensor 'blk.1.ssm_conv1d.weight': shape [3, 256], expected [4, 256]"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace revis
