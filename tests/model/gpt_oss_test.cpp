// gpt-oss beyond the golden cases (tests/testdata/gpt-oss): its keys are
// read (alternating windows, YaRN on every layer, routing), and hostile
// files are refused by name: a window of 0 or of the wrong type, a missing sink or bias
// tensor, an MXFP4 block whose exponent is the NaN encoding.
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

// The gpt-oss-tiny miniature in `mix` (Q8_0: MXFP4 experts).
std::string write_model(const TempDir& tmp, QuantMix mix = QuantMix::kF16) {
  std::optional<SyntheticSpec> spec = synthetic_preset("gpt-oss-tiny");
  EXPECT_TRUE(spec.has_value());
  spec->n_layer = 2;
  spec->mix = mix;
  return testing::write_synthetic(tmp, *spec);
}

bool keep(const gguf::TensorInfo&, std::vector<int64_t>&, std::vector<uint8_t>&, gguf::GgufWriter&) { return true; }

TEST(GptOssLoader, ReadsItsKeys) {
  TempDir tmp;
  auto file = gguf::GgufFile::open(write_model(tmp));
  ASSERT_TRUE(file.ok());
  auto c = read_model_config(**file);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Architecture::kGptOss);
  EXPECT_EQ(c->sliding.window, 32);
  EXPECT_EQ(c->sliding.pattern, 2);  // llama.cpp's default: the file has no pattern key
  EXPECT_TRUE(c->sliding.is_local(0));
  EXPECT_FALSE(c->sliding.is_local(1));
  EXPECT_FLOAT_EQ(c->sliding.rope_base, c->rope_base);  // no freq_base_swa: the same base
  EXPECT_TRUE(c->rope_yarn);
  EXPECT_FLOAT_EQ(c->rope_freq_scale, 1.0f / 32);
  EXPECT_EQ(c->yarn.n_ctx_orig, 4096);
  EXPECT_EQ(c->rope_layout, RopeLayout::kNeox);
  EXPECT_EQ(c->expert_gating, ExpertGating::kSoftmaxOfChosen);
  EXPECT_FALSE(c->expert_weights_norm);
  EXPECT_EQ(c->n_expert, 8);
  EXPECT_EQ(c->n_expert_used, 4);
  EXPECT_TRUE(c->has_attn_sinks && c->has_ffn_biases && c->clamped_swiglu && c->has_qkv_bias);
}

TEST(GptOssLoader, RefusesAWindowOfZero) {
  TempDir tmp;
  testing::write_gguf_copy(write_model(tmp), tmp.file("bad.gguf"), keep,
                           [](gguf::GgufWriter& out) { out.set_u32("gpt-oss.attention.sliding_window", 0); });
  const std::string error = load_error(tmp.file("bad.gguf"));
  EXPECT_NE(error.find("bad.gguf"), std::string::npos) << error;
  EXPECT_NE(error.find("gpt-oss.attention.sliding_window: 0"), std::string::npos) << error;
}

TEST(GptOssLoader, RefusesAWindowThatIsNoNumber) {
  TempDir tmp;
  testing::write_gguf_copy(write_model(tmp), tmp.file("bad.gguf"), keep,
                           [](gguf::GgufWriter& out) { out.set_string("gpt-oss.attention.sliding_window", "wide"); });
  const std::string error = load_error(tmp.file("bad.gguf"));
  EXPECT_NE(error.find("gpt-oss.attention.sliding_window"), std::string::npos) << error;
  EXPECT_EQ(error.find("loaded"), std::string::npos);
}

TEST(GptOssLoader, NamesAMissingTensor) {
  TempDir tmp;
  testing::expect_missing_tensors_named(
      write_model(tmp), {"blk.0.attn_sinks.weight", "blk.1.attn_output.bias", "blk.0.ffn_gate_inp.bias",
                         "blk.1.ffn_down_exps.bias", "blk.0.post_attention_norm.weight", "blk.1.attn_q.bias"});
}

TEST(GptOssLoader, NamesASinkTensorOfTheWrongShape) {
  TempDir tmp;
  testing::write_gguf_reshaped(write_model(tmp), tmp.file("bad.gguf"), "blk.1.attn_sinks.weight", {2},
                               2 * sizeof(float));
  const std::string error = load_error(tmp.file("bad.gguf"));
  EXPECT_NE(error.find("tensor 'blk.1.attn_sinks.weight': shape [2], expected [4]"), std::string::npos) << error;
}

// Exponent 0xff is NaN in the OCP spec; no encoder writes it. The block
// is named with its tensor, not read as 2^128.
TEST(GptOssLoader, RefusesAnMxfp4ExponentOfFf) {
  TempDir tmp;
  const std::string good = write_model(tmp, QuantMix::kQ8_0);
  ASSERT_EQ(load_error(good), "loaded");
  testing::write_gguf_copy(good, tmp.file("bad.gguf"),
                           [](const gguf::TensorInfo& t, std::vector<int64_t>&, std::vector<uint8_t>& bytes,
                              gguf::GgufWriter&) {
                             if (t.name == "blk.1.ffn_up_exps.weight") {
                               EXPECT_EQ(t.type, TensorType::MXFP4);
                               bytes[3 * 17] = 0xff;  // block 3's exponent
                             }
                             return true;
                           });
  const std::string error = load_error(tmp.file("bad.gguf"));
  EXPECT_NE(error.find("tensor 'blk.1.ffn_up_exps.weight': block 3 has an invalid MXFP4 scale"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace revis
