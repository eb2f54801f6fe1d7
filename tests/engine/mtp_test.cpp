// Multi-token prediction (deepseek2's nextn block, revis/draft.h's
// mtp_drafter) on synthetic models written here: the block loads and the
// model says so; a session keeps the hidden states an eval wrote; greedy
// output with the MTP drafter equals greedy output without it (several
// prompts, 1 and 2 threads) and the drafts are counted; and an oracle of
// its own: a one-layer model whose MTP block is a copy of that layer, fed
// only the (unit-RMS) embedding, guesses exactly what the model itself
// generates, so nearly every draft is accepted; and one with silent layers,
// whose block is fed only the hidden state, drafts what a plain
// computation from the token before the last says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "revis/draft.h"
#include "revis/engine.h"
#include "revis/generate.h"
#include "support/greedy_identity.h"
#include "support/testdata.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::expect_same_greedy_output;
using testing::greedy;
using testing::TempDir;

// A small DeepSeek-V3-like shape with one MTP block.
SyntheticSpec mtp_spec(int layers) {
  SyntheticSpec spec = *synthetic_preset("deepseek-v3-small");
  spec.n_embd = 128;
  spec.n_layer = layers;
  spec.n_head = 4;
  spec.head_dim = 32;
  spec.q_lora_rank = 64;
  spec.kv_lora_rank = 64;
  spec.rope_dim = 16;
  spec.head_dim_v = 32;
  spec.n_ff = 256;
  spec.n_expert = 8;
  spec.n_expert_used = 2;
  spec.n_ff_expert = 64;
  spec.n_expert_groups = 2;
  spec.n_expert_groups_used = 1;
  spec.n_vocab = 512;
  spec.n_nextn_layer = 1;
  return spec;
}

std::string write_model(const SyntheticSpec& spec, const TempDir& tmp, const std::string& name) {
  ThreadPool pool(2);
  const std::string path = tmp.file(name);
  Status s = write_synthetic_model(spec, path, pool, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return path;
}

std::unique_ptr<Engine> load(const std::string& path, int threads) {
  auto engine = Engine::load({.model_path = path, .n_ctx = 256, .n_threads = threads});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Greedy output with the MTP drafter equals greedy output without it;
// the drafted and accepted totals.
std::pair<int, int> mtp_keeps_greedy_output(Engine& engine, int max_tokens) {
  auto drafter = mtp_drafter(engine);
  EXPECT_TRUE(drafter.ok()) << drafter.status().message();
  if (!drafter.ok()) return {};
  return expect_same_greedy_output(engine, **drafter, greedy(max_tokens));
}

TEST(MtpModel, LoadsTheBlockAndSaysSo) {
  TempDir tmp;
  SyntheticSpec without = mtp_spec(2);
  without.n_nextn_layer = 0;
  auto with_mtp = load(write_model(mtp_spec(2), tmp, "mtp.gguf"), 2);
  auto plain = load(write_model(without, tmp, "plain.gguf"), 2);
  ASSERT_TRUE(with_mtp && plain);
  EXPECT_TRUE(with_mtp->info().has_mtp);
  EXPECT_EQ(with_mtp->info().n_layer, 2);
  EXPECT_FALSE(plain->info().has_mtp);
  auto refused = mtp_drafter(*plain);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no multi-token-prediction block"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(load_drafter(*with_mtp, kMtpDraft).ok());
}

// The rows an eval wrote are kept, and match the hidden state the session
// pools for embeddings; rows adopted from a checkpoint are not known.
TEST(MtpModel, SessionKeepsTheHiddenStatesAnEvalWrote) {
  TempDir tmp;
  auto engine = load(write_model(mtp_spec(2), tmp, "mtp.gguf"), 2);
  ASSERT_TRUE(engine);
  const int d = engine->info().n_embd;
  const std::vector<int32_t> tokens = {40, 97, 98, 300, 7, 12};
  auto kept = engine->new_session();
  EXPECT_TRUE(kept->hidden_state(0).empty());
  kept->keep_hidden_states();
  ASSERT_TRUE(kept->eval(tokens).ok());
  auto pooled = engine->new_session();
  for (size_t p = 0; p < tokens.size(); ++p) {
    // The mean over one token is that token's hidden state.
    auto one = pooled->mean_hidden_state({&tokens[p], 1});
    ASSERT_TRUE(one.ok());
    const auto row = kept->hidden_state(static_cast<int>(p));
    ASSERT_EQ(row.size(), static_cast<size_t>(d));
    for (int i = 0; i < d; ++i) EXPECT_NEAR(row[i], (*one)[i], 2e-2f) << "position " << p << " value " << i;
  }
  EXPECT_TRUE(kept->hidden_state(static_cast<int>(tokens.size())).empty());
  ASSERT_TRUE(kept->adopt_kv(tokens).ok());
  EXPECT_TRUE(kept->hidden_state(0).empty());
}

TEST(MtpDrafter, KeepsGreedyOutput) {
  TempDir tmp;
  const std::string path = write_model(mtp_spec(2), tmp, "mtp.gguf");
  for (int threads : {1, 2}) {
    auto engine = load(path, threads);
    ASSERT_TRUE(engine);
    const auto [drafted, accepted] = mtp_keeps_greedy_output(*engine, 24);
    std::printf("mtp (random weights) %d threads: drafted %d accepted %d\n", threads, drafted, accepted);
    EXPECT_GT(drafted, 0) << threads << " threads";
  }
}

// The oracles' files: one layer, no leading dense layer (so the MTP block
// is an expert layer like it), embeddings scaled to unit RMS (so the norms,
// all ones, give them back), and eh_proj passing one half of its input
// through: the embedding's (kEmbedding) or the hidden state's (kHidden).
// With `copy`, the block's layer is a copy of layer 0; with `silent`, every
// layer's attention output and FFN down projections are zero, so a layer
// adds nothing to its input.
enum class Passes { kEmbedding, kHidden };

std::string write_oracle_model(const TempDir& tmp, Passes passes, bool copy, bool silent) {
  SyntheticSpec spec = mtp_spec(1);
  spec.n_layer_dense_lead = 0;
  const std::string source = write_model(spec, tmp, "source.gguf");
  auto in = gguf::GgufFile::open(source);
  EXPECT_TRUE(in.ok());
  if (!in.ok()) return {};
  gguf::GgufWriter out;
  out.copy_metadata(**in);
  const int64_t d = spec.n_embd;
  auto is_layer_output = [](const std::string& name) {
    return name.find("attn_output.") != std::string::npos || name.find("ffn_down_") != std::string::npos;
  };
  for (const gguf::TensorInfo& t : (*in)->tensors()) {
    if (t.name == "token_embd.weight") {
      std::vector<float> rows(t.dims[0] * t.dims[1]);
      for (int64_t r = 0; r < t.dims[1]; ++r) {
        float* row = &rows[r * d];
        dequantize_row(t.type, t.data + r * (t.n_bytes / t.dims[1]), row, d);
        double sum = 0;
        for (int64_t i = 0; i < d; ++i) sum += double{row[i]} * row[i];
        const float scale = static_cast<float>(1.0 / std::sqrt(sum / d));
        for (int64_t i = 0; i < d; ++i) row[i] *= scale;
      }
      EXPECT_TRUE(out.add_tensor(t.name, TensorType::F32, t.dims, rows.data(), rows.size() * sizeof(float)).ok());
    } else if (t.name == "blk.1.nextn.eh_proj.weight") {
      std::vector<float> pass(2 * d * d, 0.0f);
      const int64_t half = passes == Passes::kEmbedding ? 0 : d;
      for (int64_t r = 0; r < d; ++r) pass[r * 2 * d + half + r] = 1.0f;
      EXPECT_TRUE(out.add_tensor(t.name, TensorType::F32, t.dims, pass.data(), pass.size() * sizeof(float)).ok());
    } else if (silent && is_layer_output(t.name)) {
      const std::vector<uint8_t> zeros(t.n_bytes, 0);  // zero in every float and block type
      EXPECT_TRUE(out.add_tensor(t.name, t.type, t.dims, zeros.data(), zeros.size()).ok());
    } else if (copy && t.name.rfind("blk.1.", 0) == 0 && t.name.find(".nextn.") == std::string::npos) {
      const gguf::TensorInfo* same = (*in)->tensor("blk.0." + t.name.substr(6));
      EXPECT_TRUE(same) << t.name;
      if (same) {
        EXPECT_TRUE(out.add_tensor(t.name, same->type, same->dims, same->data, same->n_bytes).ok());
      }
    } else {
      EXPECT_TRUE(out.add_tensor(t.name, t.type, t.dims, t.data, t.n_bytes).ok());
    }
  }
  const std::string path = tmp.file("oracle.gguf");
  EXPECT_TRUE(out.write(path).ok());
  return path;
}

// The block a copy of the model's layer, fed the embedding: it computes
// what the model computes, with its own KV rows of the same tokens at the
// same positions, so each draft is the model's greedy next token up to
// float rounding.
TEST(MtpDrafter, ACopyOfTheModelDraftsWhatTheModelGenerates) {
  TempDir tmp;
  auto engine = load(write_oracle_model(tmp, Passes::kEmbedding, /*copy=*/true, /*silent=*/false), 2);
  ASSERT_TRUE(engine);
  const auto [drafted, accepted] = mtp_keeps_greedy_output(*engine, 32);
  std::printf("mtp (a copy of the model) : drafted %d accepted %d\n", drafted, accepted);
  ASSERT_GT(drafted, 0);
  // Random MTP weights keep about 1 draft in n_vocab; the copy nearly all
  // (a near tie may round the other way).
  EXPECT_GE(accepted, drafted * 9 / 10);
}

// Silent layers, the block fed the hidden state: the model's final state
// at p is its embedding of token p, so the block's row p + 1 computes the
// output projection of token p's embedding, and so does every chained row
// (its own output is that embedding again). Every draft is then
// argmax(output . embedding(token before the last)), computed here plainly.
TEST(MtpDrafter, HiddenStateComesFromThePositionBefore) {
  TempDir tmp;
  const std::string path = write_oracle_model(tmp, Passes::kHidden, /*copy=*/false, /*silent=*/true);
  auto engine = load(path, 2);
  ASSERT_TRUE(engine);
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  const gguf::TensorInfo* embd = (*file)->tensor("token_embd.weight");
  const gguf::TensorInfo* output = (*file)->tensor("output.weight");
  ASSERT_TRUE(embd && output);
  const int64_t d = embd->dims[0], n_vocab = embd->dims[1];
  auto row = [&](const gguf::TensorInfo* t, int64_t r) {
    std::vector<float> v(d);
    dequantize_row(t->type, t->data + r * (t->n_bytes / t->dims[1]), v.data(), d);
    return v;
  };
  auto projected_argmax = [&](int32_t token) {
    const std::vector<float> e = row(embd, token);
    int32_t best = 0;
    double best_logit = -INFINITY;
    for (int64_t v = 0; v < n_vocab; ++v) {
      const std::vector<float> w = row(output, v);
      double logit = 0;
      for (int64_t i = 0; i < d; ++i) logit += double{w[i]} * e[i];
      if (logit > best_logit) best_logit = logit, best = static_cast<int32_t>(v);
    }
    return best;
  };

  auto drafter = mtp_drafter(*engine);
  ASSERT_TRUE(drafter.ok());
  auto session = engine->new_session();
  (*drafter)->attach(*session);
  // The target holds all of the context but its last token, as in generate().
  std::vector<int32_t> context = {40, 97, 98, 300};
  ASSERT_TRUE(session->eval(std::span(context).first(context.size() - 1)).ok());
  for (int32_t next : {7, 12, 450, 33}) {
    auto drafts = (*drafter)->draft(context, 3);
    ASSERT_TRUE(drafts.ok()) << drafts.status().message();
    ASSERT_EQ(drafts->size(), 3u);
    const int32_t expected = projected_argmax(context[context.size() - 2]);
    for (int32_t token : *drafts) EXPECT_EQ(token, expected) << "context of " << context.size();
    ASSERT_TRUE(session->eval({&context.back(), 1}).ok());
    context.push_back(next);
  }
}

}  // namespace
}  // namespace revis
