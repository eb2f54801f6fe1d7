// DeepSeek's files (deepseek2) beyond the golden cases: the loader names the
// latent-attention tensor or key that is missing or misshapen, the fused
// attn_kv_b of older files gives the logits the split tensors give,
// multi-token-prediction blocks load (or are refused by name), query temperature starts
// where the file says, and the synthetic shapes
// load and count the weights a token reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "revis/engine.h"
#include "support/active_bytes.h"
#include "support/gguf_copy.h"
#include "support/golden.h"
#include "support/testdata.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::TempDir;

const std::string kModel = testing::testdata("deepseek2/models/deepseek2-F16.gguf").string();

using Edit = testing::TensorEdit;

// Copies the shared deepseek2 file to `path` through `edit`; `metadata` may
// then override keys.
void write_copy(const std::string& path, const Edit& edit,
                const std::function<void(gguf::GgufWriter&)>& metadata = nullptr) {
  testing::write_gguf_copy(kModel, path, edit, metadata);
}

std::string load_error(const std::string& path) {
  auto engine = Engine::load({.model_path = path, .n_ctx = 64, .n_threads = 2});
  return engine.ok() ? std::string("loaded") : engine.status().message();
}

void expect_error(const std::string& message, const std::vector<std::string>& needles) {
  for (const std::string& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
}

TEST(Deepseek2Loader, NamesAMissingLatentAttentionTensor) {
  for (const std::string name : {"blk.1.attn_k_b.weight", "blk.0.attn_kv_a_norm.weight", "blk.2.attn_q_b.weight",
                                 "blk.1.exp_probs_b.bias" /* optional: V2 has none */}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    write_copy(tmp.file("m.gguf"), [&](const gguf::TensorInfo& t, auto&, auto&, auto&) { return t.name != name; });
    const std::string error = load_error(tmp.file("m.gguf"));
    if (name.ends_with(".bias"))
      EXPECT_EQ(error, "loaded");
    else
      expect_error(error, {"tensor '" + name + "' is missing", "expected shape"});
  }
}

TEST(Deepseek2Loader, NamesAMisshapenLatentAttentionTensor) {
  {
    // The latent and RoPE key 8 values short.
    TempDir tmp;
    write_copy(tmp.file("m.gguf"), [](const gguf::TensorInfo& t, std::vector<int64_t>& dims, auto& bytes, auto&) {
      if (t.name == "blk.0.attn_kv_a_mqa.weight") {
        dims[1] -= 8;
        bytes.resize(row_bytes(t.type, dims[0]) * dims[1]);
      }
      return true;
    });
    expect_error(load_error(tmp.file("m.gguf")),
                 {"blk.0.attn_kv_a_mqa.weight", "shape [256, 72], expected [256, 80]"});
  }
  {
    // attn_v_b with its two inner dims swapped (the same bytes).
    TempDir tmp;
    write_copy(tmp.file("m.gguf"), [](const gguf::TensorInfo& t, std::vector<int64_t>& dims, auto&, auto&) {
      if (t.name == "blk.2.attn_v_b.weight") std::swap(dims[0], dims[1]);
      return true;
    });
    expect_error(load_error(tmp.file("m.gguf")), {"blk.2.attn_v_b.weight", "shape [32, 64, 4], expected [64, 32, 4]"});
  }
}

TEST(Deepseek2Loader, NamesAnInconsistentKey) {
  TempDir tmp;
  write_copy(
      tmp.file("m.gguf"), [](auto&, auto&, auto&, auto&) { return true; },
      [](gguf::GgufWriter& out) { out.set_u32("deepseek2.attention.key_length", 88); });
  expect_error(load_error(tmp.file("m.gguf")), {"deepseek2.attention.key_length: 88", "kv_lora_rank"});

  TempDir tmp2;
  write_copy(
      tmp2.file("m.gguf"), [](auto&, auto&, auto&, auto&) { return true; },
      [](gguf::GgufWriter& out) { out.set_u32("deepseek2.rope.dimension_count", 48); });
  expect_error(load_error(tmp2.file("m.gguf")), {"deepseek2.rope.dimension_count: 48", "key_length_mla"});
}

// Older converters wrote attn_kv_b: per head, the no-RoPE key's rows and
// then the value's, each a row over the latent. Made here from the split
// tensors, it must give the same model.
TEST(Deepseek2Loader, FusedKvBMatchesTheSplitTensors) {
  constexpr int64_t kLatent = 64, kNope = 32, kValue = 32, kHeads = 4;
  TempDir tmp;
  std::vector<uint16_t> k_b;  // the layer's attn_k_b, kept until its attn_v_b arrives
  write_copy(tmp.file("fused.gguf"), [&](const gguf::TensorInfo& t, auto&, std::vector<uint8_t>& bytes,
                                         gguf::GgufWriter& out) {
    if (t.name.ends_with("attn_k_b.weight")) {
      EXPECT_EQ(t.type, TensorType::F16);
      k_b.resize(bytes.size() / 2);
      std::memcpy(k_b.data(), bytes.data(), bytes.size());
      return false;
    }
    if (!t.name.ends_with("attn_v_b.weight")) return true;
    std::vector<uint16_t> v_b(bytes.size() / 2);
    std::memcpy(v_b.data(), bytes.data(), bytes.size());
    std::vector<uint16_t> kv_b(kHeads * (kNope + kValue) * kLatent);
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t r = 0; r < kLatent; ++r) {
        for (int64_t i = 0; i < kNope; ++i)  // attn_k_b: [nope] -> latent, per head
          kv_b[(h * (kNope + kValue) + i) * kLatent + r] = k_b[(h * kLatent + r) * kNope + i];
        for (int64_t j = 0; j < kValue; ++j)  // attn_v_b: [latent] -> value, per head
          kv_b[(h * (kNope + kValue) + kNope + j) * kLatent + r] = v_b[(h * kValue + j) * kLatent + r];
      }
    const std::string name = t.name.substr(0, t.name.find("attn_v_b")) + "attn_kv_b.weight";
    EXPECT_TRUE(out.add_tensor(name, TensorType::F16, {kLatent, kHeads * (kNope + kValue)}, kv_b.data(),
                               kv_b.size() * sizeof(uint16_t))
                    .ok());
    return false;
  });

  const testing::GoldenCase g = testing::load_golden("deepseek2/deepseek2-F16.en");
  auto split = Engine::load({.model_path = kModel, .n_ctx = 128, .n_threads = 2});
  auto fused = Engine::load({.model_path = tmp.file("fused.gguf"), .n_ctx = 128, .n_threads = 2});
  ASSERT_TRUE(split.ok() && fused.ok()) << (fused.ok() ? "" : fused.status().message());
  auto a = (*split)->new_session();
  auto b = (*fused)->new_session();
  ASSERT_TRUE(a->eval(g.prompt_tokens, true).ok());
  ASSERT_TRUE(b->eval(g.prompt_tokens, true).ok());
  // The fused file's matrices are float32, the split ones float16 (whose
  // products round the activations to float16): close, not identical.
  for (int k = 0; k < static_cast<int>(g.prompt_tokens.size()); ++k)
    EXPECT_LE(testing::logit_error(b->logits(k).data(), a->logits(k).data(), g.n_vocab), 0.02) << "position " << k;
}

// A copy of the shared file with a multi-token-prediction block
// (nextn_predict_layers 1: the last block again as blk.3, with its nextn
// norms) and an eh_proj of these dims, none when empty.
void write_mtp_copy(const std::string& path, const std::vector<int64_t>& eh_proj_dims) {
  write_copy(
      path,
      [&](const gguf::TensorInfo& t, auto&, auto& bytes, gguf::GgufWriter& out) {
        if (t.name.rfind("blk.2.", 0) == 0) {
          EXPECT_TRUE(out.add_tensor("blk.3." + t.name.substr(6), t.type, t.dims, bytes.data(), bytes.size()).ok());
          if (t.name == "blk.2.attn_norm.weight") {
            for (const char* norm : {"blk.3.nextn.enorm.weight", "blk.3.nextn.hnorm.weight"})
              EXPECT_TRUE(out.add_tensor(norm, t.type, t.dims, bytes.data(), bytes.size()).ok());
          }
        }
        if (t.name == "token_embd.weight" && !eh_proj_dims.empty()) {
          const std::vector<float> zeros(eh_proj_dims[0] * eh_proj_dims[1], 0.0f);
          EXPECT_TRUE(out.add_tensor("blk.3.nextn.eh_proj.weight", TensorType::F32, eh_proj_dims, zeros.data(),
                                     zeros.size() * sizeof(float))
                          .ok());
        }
        return true;
      },
      [](gguf::GgufWriter& out) {
        out.set_u32("deepseek2.block_count", 4);
        out.set_u32("deepseek2.nextn_predict_layers", 1);
      });
}

// The block loads beside the model, whose own logits are those of the file
// without it.
TEST(Deepseek2Loader, LoadsMultiTokenPredictionBlocks) {
  TempDir tmp;
  auto in = gguf::GgufFile::open(kModel);
  ASSERT_TRUE(in.ok());
  const int64_t d = (*in)->tensor("token_embd.weight")->dims[0];
  write_mtp_copy(tmp.file("mtp.gguf"), {2 * d, d});
  auto plain = Engine::load({.model_path = kModel, .n_ctx = 64, .n_threads = 2});
  auto mtp = Engine::load({.model_path = tmp.file("mtp.gguf"), .n_ctx = 64, .n_threads = 2});
  ASSERT_TRUE(plain.ok() && mtp.ok()) << (mtp.ok() ? "" : mtp.status().message());
  EXPECT_EQ((*mtp)->info().n_layer, 3);
  EXPECT_TRUE((*mtp)->info().has_mtp);
  EXPECT_FALSE((*plain)->info().has_mtp);
  const std::vector<int32_t> tokens = {11, 549, 445, 772, 270};
  auto a = (*plain)->new_session();
  auto b = (*mtp)->new_session();
  ASSERT_TRUE(a->eval(tokens, true).ok());
  ASSERT_TRUE(b->eval(tokens, true).ok());
  for (int k = 0; k < static_cast<int>(tokens.size()); ++k)
    EXPECT_TRUE(std::equal(a->logits(k).begin(), a->logits(k).end(), b->logits(k).begin())) << "position " << k;
}

// A block without its eh_proj, or with one of the wrong shape, is refused
// by name.
TEST(Deepseek2Loader, RefusesAnIncompleteMultiTokenPredictionBlock) {
  TempDir tmp;
  write_mtp_copy(tmp.file("missing.gguf"), {});
  expect_error(load_error(tmp.file("missing.gguf")), {"blk.3.nextn.eh_proj.weight", "missing"});
  write_mtp_copy(tmp.file("misshapen.gguf"), {7, 5});
  expect_error(load_error(tmp.file("misshapen.gguf")), {"blk.3.nextn.eh_proj.weight", "[7, 5]", "expected"});
}

// The query temperature keys (Mistral Large 3 as deepseek2): queries before
// temperature_length keep temperature 1, so the logits there are the plain
// model's; from it on they change.
TEST(Deepseek2Loader, QueryTemperatureStartsAtItsLength) {
  constexpr int kLength = 4;
  TempDir tmp;
  write_copy(
      tmp.file("t.gguf"), [](auto&, auto&, auto&, auto&) { return true; },
      [](gguf::GgufWriter& out) {
        out.set_f32("deepseek2.attention.temperature_scale", 0.5f);
        out.set_u32("deepseek2.attention.temperature_length", kLength);
      });
  auto plain = Engine::load({.model_path = kModel, .n_ctx = 64, .n_threads = 2});
  auto tempered = Engine::load({.model_path = tmp.file("t.gguf"), .n_ctx = 64, .n_threads = 2});
  ASSERT_TRUE(plain.ok() && tempered.ok()) << (tempered.ok() ? "" : tempered.status().message());
  const std::vector<int32_t> tokens = {11, 549, 445, 772, 270, 730, 77, 267};
  auto a = (*plain)->new_session();
  auto b = (*tempered)->new_session();
  ASSERT_TRUE(a->eval(tokens, true).ok());
  ASSERT_TRUE(b->eval(tokens, true).ok());
  for (int k = 0; k < static_cast<int>(tokens.size()); ++k) {
    const bool same = std::equal(a->logits(k).begin(), a->logits(k).end(), b->logits(k).begin());
    EXPECT_EQ(same, k < kLength) << "position " << k;
  }

  TempDir tmp2;
  write_copy(
      tmp2.file("t.gguf"), [](auto&, auto&, auto&, auto&) { return true; },
      [](gguf::GgufWriter& out) { out.set_f32("deepseek2.attention.temperature_scale", 0.5f); });
  expect_error(load_error(tmp2.file("t.gguf")), {"deepseek2.attention.temperature_length: missing"});
}

// mkmodel's V3-style shape, shrunk: it loads, runs, and a token reads every
// matrix but the routed experts, of which it reads the used share.
TEST(Deepseek2Synthetic, ActiveBytesCountTheUsedExperts) {
  SyntheticSpec spec = *synthetic_preset("deepseek-v3-small");
  spec.n_embd = 256;
  spec.n_layer = 3;
  spec.n_ff = 512;
  spec.n_vocab = 512;
  spec.mix = QuantMix::kQ8_0;
  TempDir tmp;
  ThreadPool pool(2);
  ASSERT_TRUE(write_synthetic_model(spec, tmp.file("m.gguf"), pool, nullptr).ok());
  auto engine = Engine::load({.model_path = tmp.file("m.gguf"), .n_ctx = 64, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();

  auto file = gguf::GgufFile::open(tmp.file("m.gguf"));
  ASSERT_TRUE(file.ok());
  const uint64_t expected = testing::active_weight_bytes(**file, spec.n_expert, spec.n_expert_used);
  EXPECT_EQ((*engine)->info().bytes_per_token, expected);
  EXPECT_EQ((*engine)->info().n_head_kv, 1);
  EXPECT_EQ((*engine)->info().head_dim_k, spec.kv_lora_rank + spec.rope_dim);
  EXPECT_EQ((*engine)->info().head_dim_v, 0);

  auto session = (*engine)->new_session();
  const std::vector<int32_t> tokens = {1, 50, 300, 7, 42};
  ASSERT_TRUE(session->eval(tokens, false).ok());
  for (float v : session->logits(0)) ASSERT_TRUE(std::isfinite(v));
}

// mkmodel's V2-Lite shape, shrunk: a query without a bottleneck, which the
// file says with q_lora_rank = 0 as DeepSeek-V2-Lite's files do (llama.cpp
// refuses a deepseek2 file without the key).
TEST(Deepseek2Synthetic, TheLiteShapeHasAQueryWithoutABottleneck) {
  SyntheticSpec spec = *synthetic_preset("deepseek-v2-lite");
  spec.n_embd = 256;
  spec.n_layer = 2;
  spec.n_ff = 512;
  spec.n_expert = 8;
  spec.n_ff_expert = 256;
  spec.n_vocab = 512;
  spec.mix = QuantMix::kQ8_0;
  TempDir tmp;
  ThreadPool pool(2);
  ASSERT_TRUE(write_synthetic_model(spec, tmp.file("m.gguf"), pool, nullptr).ok());
  auto file = gguf::GgufFile::open(tmp.file("m.gguf"));
  ASSERT_TRUE(file.ok());
  ASSERT_NE((*file)->find("deepseek2.attention.q_lora_rank"), nullptr);
  EXPECT_EQ(*(*file)->get_int("deepseek2.attention.q_lora_rank", -1), 0);
  EXPECT_NE((*file)->tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ((*file)->tensor("blk.0.attn_q_a.weight"), nullptr);

  auto engine = Engine::load({.model_path = tmp.file("m.gguf"), .n_ctx = 64, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  auto session = (*engine)->new_session();
  ASSERT_TRUE(session->eval(std::vector<int32_t>{1, 50, 300, 7}, false).ok());
  for (float v : session->logits(0)) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace revis
