// Gemma 4 beyond the golden cases (tests/testdata/gemma4, gemma4moe): the
// loader reads its per-layer flags, shared caches, per-layer embeddings and
// experts, names every missing or misshapen tensor and every key or
// tensor it cannot take (a local key and value of two widths, per-layer
// KV heads that do not divide the heads, shared layers after the wrong
// kinds), reads two head widths and KV heads per layer, splits fused gate
// and up experts as the separate ones, reads FFN widths one per layer, a
// file without attn_v takes the keys'
// projection as values, the cache holds only the layers that make keys, a
// prompt in pieces gives the bits of it whole, and the GPU leaves every
// gemma4 layer on the CPU with a reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/config.h"
#include "model/device_layers.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/weights.h"
#include "revis/engine.h"
#include "support/gguf_copy.h"
#include "support/synthetic_file.h"
#include "support/testdata.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::load_error;
using testing::TempDir;

// gemma4-small, or with `experts` experts (2 used) beside each dense FFN.
std::string write_model(const TempDir& tmp, int experts = 0) {
  std::optional<SyntheticSpec> spec = synthetic_preset("gemma4-small");
  EXPECT_TRUE(spec.has_value());
  spec->n_vocab = 300;
  spec->n_expert = experts;
  spec->n_expert_used = 2;
  spec->n_ff_expert = 64;
  return testing::write_synthetic(tmp, *spec);
}

// A copy of `good` as bad.gguf with `metadata` overriding keys; the message loading it gives.
std::string error_with(const TempDir& tmp, const std::string& good,
                       const std::function<void(gguf::GgufWriter&)>& metadata) {
  testing::write_gguf_copy(
      good, tmp.file("bad.gguf"),
      [](const gguf::TensorInfo&, std::vector<int64_t>&, std::vector<uint8_t>&, gguf::GgufWriter&) { return true; },
      metadata);
  return load_error(tmp.file("bad.gguf"));
}

TEST(Gemma4Loader, ReadsItsLayersAndSharedCaches) {
  TempDir tmp;
  auto file = gguf::GgufFile::open(write_model(tmp));
  ASSERT_TRUE(file.ok());
  auto c = read_model_config(**file);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Architecture::kGemma4);
  EXPECT_EQ(c->sliding.window, 32);
  const std::vector<bool> local = {true, true, false, true, true, false};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c->sliding.is_local(i), local[i]) << "layer " << i;
  // Layers 3..5 read the caches of the last local (1) and global (2) layer.
  EXPECT_EQ(c->n_kv_layer(), 3);
  const std::vector<int> kv = {0, 1, 2, 1, 1, 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c->kv_layer(i), kv[i]) << "layer " << i;
  EXPECT_EQ(c->gemma4.n_embd_per_layer, 32);
  EXPECT_FLOAT_EQ(c->attn_scale, 1.0f);
  // No final_logit_softcapping in the file: Gemma 4's cap of 30, as llama.cpp.
  EXPECT_FLOAT_EQ(c->logit_softcap, 30.0f);
  EXPECT_FLOAT_EQ(c->sliding.rope_base, 10000.0f);
}

// The file's own cap wins; 0 turns it off.
TEST(Gemma4Loader, TakesTheFilesSoftCap) {
  TempDir tmp;
  for (float cap : {0.0f, 12.5f}) {
    testing::write_gguf_copy(
        write_model(tmp), tmp.file("capped.gguf"),
        [](const gguf::TensorInfo&, std::vector<int64_t>&, std::vector<uint8_t>&, gguf::GgufWriter&) { return true; },
        [cap](gguf::GgufWriter& w) { w.set_f32("gemma4.final_logit_softcapping", cap); });
    auto file = gguf::GgufFile::open(tmp.file("capped.gguf"));
    ASSERT_TRUE(file.ok());
    auto c = read_model_config(**file);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_FLOAT_EQ(c->logit_softcap, cap);
  }
}

TEST(Gemma4Loader, NamesAMissingTensor) {
  TempDir tmp;
  testing::expect_missing_tensors_named(
      write_model(tmp), {"per_layer_token_embd.weight", "per_layer_model_proj.weight", "per_layer_proj_norm.weight",
                         "blk.0.inp_gate.weight", "blk.4.proj.weight", "blk.5.post_norm.weight",
                         "blk.2.attn_k.weight", "blk.1.attn_k_norm.weight", "blk.3.attn_q.weight"});
}

TEST(Gemma4Loader, ReadsItsExpertsBesideTheDenseFfn) {
  TempDir tmp;
  auto file = gguf::GgufFile::open(write_model(tmp, 8));
  ASSERT_TRUE(file.ok());
  auto c = read_model_config(**file);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->n_expert, 8);
  EXPECT_EQ(c->n_expert_used, 2);
  EXPECT_EQ(c->n_ff_expert, 64);
  EXPECT_EQ(c->n_ff, 384);
  EXPECT_EQ(c->expert_gating, ExpertGating::kSoftmax);
  EXPECT_TRUE(c->expert_weights_norm);
  for (int i = 0; i < c->n_layer; ++i) EXPECT_TRUE(c->is_moe_layer(i)) << "layer " << i;
  auto w = load_model_weights(**file, *c);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_FALSE(w->layers[0].w_gate.empty());
  EXPECT_EQ(w->layers[5].down_exps_scale.size(), 8u);
}

TEST(Gemma4Loader, NamesAMissingExpertTensor) {
  TempDir tmp;
  testing::expect_missing_tensors_named(
      write_model(tmp, 8), {"blk.0.ffn_gate_inp.scale", "blk.1.pre_ffw_norm_2.weight", "blk.2.post_ffw_norm_1.weight",
                            "blk.3.post_ffw_norm_2.weight", "blk.4.ffn_up.weight", "blk.5.ffn_down_exps.weight"});
}

// A copy of `good` (8 experts of 64) with each layer's gate and up experts
// fused into ffn_gate_up_exps, as published files have them: per expert
// its gate rows, then its up rows. `gate_rows` of each are kept (64: all;
// fewer makes a misshapen tensor).
std::string write_fused_copy(const TempDir& tmp, const std::string& good, int64_t gate_rows = 64) {
  auto src = gguf::GgufFile::open(good);
  EXPECT_TRUE(src.ok());
  const std::string path = tmp.file("fused.gguf");
  testing::write_gguf_copy(good, path,
                           [&](const gguf::TensorInfo& t, std::vector<int64_t>&, std::vector<uint8_t>&,
                               gguf::GgufWriter& out) {
                             if (t.name.ends_with("ffn_up_exps.weight")) return false;
                             if (!t.name.ends_with("ffn_gate_exps.weight")) return true;
                             const std::string p = t.name.substr(0, t.name.size() - std::string("ffn_gate_exps.weight").size());
                             const gguf::TensorInfo* up = (*src)->tensor(p + "ffn_up_exps.weight");
                             const size_t expert = t.n_bytes / t.dims[2], kept = expert / t.dims[1] * gate_rows;
                             std::vector<uint8_t> fused;
                             for (int64_t e = 0; e < t.dims[2]; ++e) {
                               fused.insert(fused.end(), t.data + e * expert, t.data + e * expert + kept);
                               fused.insert(fused.end(), up->data + e * expert, up->data + (e + 1) * expert);
                             }
                             EXPECT_TRUE(out.add_tensor(p + "ffn_gate_up_exps.weight", t.type,
                                                        {t.dims[0], gate_rows + t.dims[1], t.dims[2]}, fused.data(),
                                                        fused.size())
                                             .ok());
                             return false;
                           });
  return path;
}

// Fused gate and up experts split into the stacks the separate tensors
// give, byte for byte, every expert in its place.
TEST(Gemma4Loader, SplitsFusedGateUpExperts) {
  TempDir tmp;
  const std::string good = write_model(tmp, 8);
  const std::string fused = write_fused_copy(tmp, good);
  auto a = gguf::GgufFile::open(good);
  auto b = gguf::GgufFile::open(fused);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*b)->tensor("blk.0.ffn_gate_exps.weight"), nullptr);
  auto ca = read_model_config(**a);
  auto cb = read_model_config(**b);
  ASSERT_TRUE(ca.ok() && cb.ok());
  auto wa = load_model_weights(**a, *ca);
  auto wb = load_model_weights(**b, *cb);
  ASSERT_TRUE(wa.ok()) << wa.status().message();
  ASSERT_TRUE(wb.ok()) << wb.status().message();
  for (int layer = 0; layer < ca->n_layer; ++layer)
    for (auto stack : {&LayerWeights::gate_exps, &LayerWeights::up_exps}) {
      const Matrix& x = wa->layers[layer].*stack;
      const Matrix& y = wb->layers[layer].*stack;
      ASSERT_EQ(y.rows, x.rows);
      ASSERT_EQ(y.n_mats, x.n_mats);
      ASSERT_EQ(y.cols, x.cols);
      for (int64_t e = 0; e < x.n_mats; ++e)
        EXPECT_TRUE(std::equal(x.slice(e).data, x.slice(e).data + x.rows * x.row_bytes, y.slice(e).data))
            << "layer " << layer << " expert " << e;
    }
}

// Once the model keeps its weights in stripes, the file's fused tensor
// (read into memory) is given back: nothing reads it after the split.
TEST(Gemma4Loader, GivesTheFusedTensorBackOnceInStripes) {
  TempDir tmp;
  const std::string fused = write_fused_copy(tmp, write_model(tmp, 8));
  auto file = gguf::GgufFile::open(fused, gguf::Placement::kCopy);
  ASSERT_TRUE(file.ok());
  std::shared_ptr<const gguf::GgufFile> shared = std::move(*file);
  auto model = Model::load(shared);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto striped = (*model)->keep_weights_in_stripes();
  ASSERT_TRUE(striped.ok()) << striped.status().message();
  int given_back = 0;
  for (const gguf::TensorInfo& t : shared->tensors())
    if (t.name.ends_with("ffn_gate_up_exps.weight")) given_back += (*model)->reads_in_stripes(t) ? 1 : 0;
  EXPECT_EQ(given_back, 6);
}

// A fused stack of the wrong height is named with the shape it needs.
TEST(Gemma4Loader, NamesAMisshapenFusedExpertTensor) {
  TempDir tmp;
  const std::string error = load_error(write_fused_copy(tmp, write_model(tmp, 8), 32));
  EXPECT_NE(error.find("tensor 'blk.0.ffn_gate_up_exps.weight': shape [128, 96, 8], expected [128, 128, 8]"),
            std::string::npos)
      << error;
}

TEST(Gemma4Loader, NamesAMisshapenTensor) {
  for (const auto& [name, dims] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"per_layer_model_proj.weight", {128, 160}}, {"blk.0.inp_gate.weight", {128, 16}},
           {"per_layer_token_embd.weight", {160, 300}}}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    const std::string good = write_model(tmp);
    testing::write_gguf_reshaped(good, tmp.file("bad.gguf"), name, dims, dims[0] * dims[1] * 2);
    const std::string error = load_error(tmp.file("bad.gguf"));
    EXPECT_NE(error.find("tensor '" + name + "': shape"), std::string::npos) << error;
  }
}

// The published shapes: local layers narrower than the global ones, and
// a KV head count per layer; the cache takes each layer's geometry.
TEST(Gemma4Loader, ReadsTwoHeadWidthsAndKvHeadsPerLayer) {
  std::optional<SyntheticSpec> spec = synthetic_preset("gemma4-small");
  ASSERT_TRUE(spec.has_value());
  spec->n_vocab = 300;
  spec->head_dim_swa = 32;
  spec->layer_kv_heads = {2, 4, 1, 2, 4, 1};
  TempDir tmp;
  auto file = gguf::GgufFile::open(testing::write_synthetic(tmp, *spec));
  ASSERT_TRUE(file.ok());
  auto c = read_model_config(**file);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->key_width(0), 32);
  EXPECT_EQ(c->value_width(1), 32);
  EXPECT_EQ(c->key_width(2), 64) << "the global layer";
  EXPECT_EQ(c->gemma4.rope_dims_local, 32);
  EXPECT_EQ(c->kv_heads(1), 4);
  EXPECT_EQ(c->kv_heads(2), 1);
  EXPECT_EQ(c->n_head_kv, 4) << "the largest";
  const std::vector<KvCache::LayerShape> shapes = KvCache::layer_shapes(*c, 64);
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_EQ(shapes[1].n_head_kv, 4);
  EXPECT_EQ(shapes[1].dim_k, 32);
  EXPECT_TRUE(shapes[1].ring);
  EXPECT_EQ(shapes[2].n_head_kv, 1);
  EXPECT_EQ(shapes[2].dim_v, 64);
  EXPECT_FALSE(shapes[2].ring);
  auto engine = Engine::load({.model_path = tmp.file("good.gguf"), .n_ctx = 64, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_EQ((*engine)->info().kv_bytes_per_token, 1u * (64 + 64) * sizeof(uint16_t));
  auto session = (*engine)->new_session();
  std::vector<int32_t> tokens(60);  // past the window of 32
  for (int i = 0; i < 60; ++i) tokens[i] = 3 + (i * 31) % 290;
  Status s = session->eval(tokens);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(Gemma4Loader, RefusesWhatItCannotRunByKey) {
  TempDir tmp;
  const std::string good = write_model(tmp);
  const std::string widths = error_with(tmp, good, [](gguf::GgufWriter& out) {
    out.set_u32("gemma4.attention.key_length_swa", 128);
    out.set_u32("gemma4.attention.value_length_swa", 64);
  });
  EXPECT_NE(widths.find("gemma4.attention.value_length_swa: 64 (expected key_length_swa 128)"), std::string::npos)
      << widths;
  const std::string odd = error_with(
      tmp, good, [](gguf::GgufWriter& out) { out.set_i32_array("gemma4.attention.head_count_kv", {2, 3, 2, 2, 2, 2}); });
  EXPECT_NE(odd.find("gemma4.attention.head_count_kv: 3 (layer 1) does not divide head_count 4"), std::string::npos)
      << odd;
  const std::string short_array = error_with(
      tmp, good, [](gguf::GgufWriter& out) { out.set_i32_array("gemma4.attention.head_count_kv", {2, 2}); });
  EXPECT_NE(short_array.find("gemma4.attention.head_count_kv: 2 counts (expected one per layer, 6)"),
            std::string::npos)
      << short_array;
  const std::string ffn = error_with(
      tmp, good, [](gguf::GgufWriter& out) { out.set_i32_array("gemma4.feed_forward_length", {384, 384}); });
  EXPECT_NE(ffn.find("gemma4.feed_forward_length"), std::string::npos) << ffn;
  // Experts counted in the keys want their tensors.
  const std::string experts = error_with(tmp, good, [](gguf::GgufWriter& out) {
    out.set_u32("gemma4.expert_count", 8);
    out.set_u32("gemma4.expert_used_count", 2);
    out.set_u32("gemma4.expert_feed_forward_length", 64);
  });
  EXPECT_NE(experts.find("tensor 'blk.0.ffn_gate_inp.scale' is missing"), std::string::npos) << experts;
  const std::string flags = error_with(
      tmp, good, [](gguf::GgufWriter& out) { out.set_i32_array("gemma4.attention.sliding_window_pattern", {1, 0}); });
  EXPECT_NE(flags.find("gemma4.attention.sliding_window_pattern: 2 flags (expected one per layer, 6)"),
            std::string::npos)
      << flags;
  // Two shared layers would follow a local layer: none for them to read.
  const std::string shared =
      error_with(tmp, good, [](gguf::GgufWriter& out) { out.set_u32("gemma4.attention.shared_kv_layers", 2); });
  EXPECT_NE(shared.find("gemma4.attention.shared_kv_layers: 2"), std::string::npos) << shared;
  const std::string window =
      error_with(tmp, good, [](gguf::GgufWriter& out) { out.set_u32("gemma4.attention.sliding_window", 0); });
  EXPECT_NE(window.find("gemma4.attention.sliding_window: 0"), std::string::npos) << window;
}

// Double-wide FFNs in the layers that read earlier caches (E2B's layout):
// one feed_forward_length per layer, each layer's FFN bound at its width.
TEST(Gemma4Loader, ReadsOneFfnWidthPerLayer) {
  TempDir tmp;
  std::optional<SyntheticSpec> spec = synthetic_preset("gemma4-small");
  ASSERT_TRUE(spec.has_value());
  spec->n_vocab = 300;
  spec->double_wide_shared_ffn = true;
  auto file = gguf::GgufFile::open(testing::write_synthetic(tmp, *spec));
  ASSERT_TRUE(file.ok());
  auto c = read_model_config(**file);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->ff_widths, (std::vector<int>{384, 384, 384, 768, 768, 768}));
  EXPECT_EQ(c->n_ff, 384);
  auto w = load_model_weights(**file, *c);
  ASSERT_TRUE(w.ok()) << w.status().message();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(w->layers[i].w_gate.rows, c->ff_width(i)) << "layer " << i;
    EXPECT_EQ(w->layers[i].w_down.cols, c->ff_width(i)) << "layer " << i;
  }
}

TEST(Gemma4Loader, NamesABadFfnWidthArray) {
  TempDir tmp;
  const std::string good = write_model(tmp);
  const std::string count = error_with(
      tmp, good, [](gguf::GgufWriter& out) { out.set_i32_array("gemma4.feed_forward_length", {384, 384}); });
  EXPECT_NE(count.find("gemma4.feed_forward_length: 2 values (expected one per layer, 6)"), std::string::npos)
      << count;
  const std::string zero = error_with(tmp, good, [](gguf::GgufWriter& out) {
    out.set_i32_array("gemma4.feed_forward_length", {384, 384, 0, 384, 384, 384});
  });
  EXPECT_NE(zero.find("gemma4.feed_forward_length[2]: 0 (expected an integer in 1.."), std::string::npos) << zero;
  // A width the tensors do not have names the tensor.
  const std::string wide = error_with(tmp, good, [](gguf::GgufWriter& out) {
    out.set_i32_array("gemma4.feed_forward_length", {384, 384, 384, 384, 384, 768});
  });
  EXPECT_NE(wide.find("tensor 'blk.5.ffn_gate.weight': shape [128, 384], expected [128, 768]"), std::string::npos)
      << wide;
}

std::vector<float> last_logits(const std::string& path, const std::vector<int32_t>& tokens) {
  auto engine = Engine::load({.model_path = path, .n_ctx = 64, .n_threads = 2});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {};
  auto session = (*engine)->new_session();
  Status s = session->eval(tokens);
  EXPECT_TRUE(s.ok()) << s.message();
  return std::vector<float>(session->logits(0).begin(), session->logits(0).end());
}

// Without attn_v a layer's values are its keys' projection (normed without
// a weight, not rotated): the file loads, and its logits are those of a
// file whose attn_v is a copy of attn_k.
TEST(Gemma4Attention, WithoutAttnVTheValuesAreTheKeysProjection) {
  TempDir tmp;
  const std::string good = write_model(tmp);
  testing::write_gguf_without(good, tmp.file("no_v.gguf"), "blk.0.attn_v.weight");
  std::vector<uint8_t> keys;
  {
    auto in = gguf::GgufFile::open(good);
    ASSERT_TRUE(in.ok());
    const gguf::TensorInfo* k = (*in)->tensor("blk.0.attn_k.weight");
    ASSERT_NE(k, nullptr);
    keys.assign(k->data, k->data + k->n_bytes);
  }
  testing::write_gguf_copy(good, tmp.file("v_is_k.gguf"),
                           [&](const gguf::TensorInfo& t, std::vector<int64_t>&, std::vector<uint8_t>& bytes,
                               gguf::GgufWriter&) {
                             if (t.name == "blk.0.attn_v.weight") bytes = keys;
                             return true;
                           });
  const std::vector<int32_t> tokens = {1, 20, 30, 40, 50, 60, 70};
  const std::vector<float> without = last_logits(tmp.file("no_v.gguf"), tokens);
  EXPECT_FALSE(without.empty());
  EXPECT_EQ(without, last_logits(tmp.file("v_is_k.gguf"), tokens));
  EXPECT_NE(without, last_logits(good, tokens));
}

// The shared layers keep no rows of their own: a token's cache is that of
// the three layers that make keys and values, of which the global one
// keeps rows by position and the two local ones rings of 384 rows (a
// window of 32 and a chunk of 256, in tiles of 128), whatever the context.
TEST(Gemma4Attention, TheCacheHoldsOnlyTheLayersThatMakeKeys) {
  TempDir tmp;
  auto engine = Engine::load({.model_path = write_model(tmp), .n_ctx = 64, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_EQ((*engine)->info().n_kv_layer, 1);
  EXPECT_EQ((*engine)->info().kv_bytes_per_token, 1u * 2 * (64 + 64) * sizeof(uint16_t));
  EXPECT_EQ((*engine)->info().recurrent_state_bytes, 2u * 2 * 384 * (64 + 64) * sizeof(uint16_t));
  EXPECT_EQ((*engine)->info().session_state_bytes, (*engine)->info().recurrent_state_bytes);
}

// A prompt evaluated in pieces (the window and the shared layers' reads
// crossing their borders, as a resumed prefix continues) gives the bits of
// the prompt evaluated whole, with and without experts.
TEST(Gemma4Attention, PiecesGiveTheBitsOfTheWhole) {
  for (int experts : {0, 8}) {
    SCOPED_TRACE(experts);
    TempDir tmp;
    auto engine = Engine::load({.model_path = write_model(tmp, experts), .n_ctx = 256, .n_threads = 2});
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    std::vector<int32_t> tokens(150);
    for (int i = 0; i < 150; ++i) tokens[i] = 3 + (i * 53) % 250;
    auto whole = (*engine)->new_session();
    ASSERT_TRUE(whole->eval(tokens).ok());
    auto pieces = (*engine)->new_session();
    for (int start = 0; start < 150; start += 64) {
      const int len = std::min(64, 150 - start);
      ASSERT_TRUE(pieces->eval(std::span(tokens).subspan(start, len)).ok());
    }
    EXPECT_EQ(std::vector<float>(pieces->logits(0).begin(), pieces->logits(0).end()),
              std::vector<float>(whole->logits(0).begin(), whole->logits(0).end()));
  }
}

// The GPU runs none of gemma4's layers yet: each stays on the CPU with a
// reason that names the architecture (Model::offload turns it into the
// warning "N layer(s) stay on the CPU (...)").
TEST(Gemma4Device, EveryLayerFallsBackToTheCpuWithAReason) {
  TempDir tmp;
  auto file = gguf::GgufFile::open(write_model(tmp));
  ASSERT_TRUE(file.ok());
  auto c = read_model_config(**file);
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto w = load_model_weights(**file, *c);
  ASSERT_TRUE(w.ok()) << w.status().message();
  for (int layer = 0; layer < c->n_layer; ++layer)
    EXPECT_EQ(DeviceLayers::unsupported(*c, w->layers[layer], layer, gpu::DeviceInfo{}),
              "the gemma4 block is not written for the GPU yet")
        << "layer " << layer;
}

}  // namespace
}  // namespace revis
