// qwen35 beyond the golden cases (tests/testdata/qwen35): its keys are read
// (the gated delta-net's shape, which layers recur, M-RoPE sections),
// hostile files are refused by name (a convolution of 0 taps, a state that
// overflows, missing or misshapen tensors), and a recurrent state is
// continued only from where it stands or from a copy kept at an earlier
// position: a session resumed in RAM or from a checkpoint's rows and state
// gives the bits of a cold prefill, and one asked to go back anywhere else
// fails instead of answering wrongly.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/config.h"
#include "revis/engine.h"
#include "revis/session_pool.h"
#include "support/gguf_copy.h"
#include "support/synthetic_file.h"
#include "support/testdata.h"
#include "tools/synthetic.h"

namespace revis {
namespace {

using testing::load_error;
using testing::TempDir;

// A miniature (qwen35-tiny: layers 0-2 recurrent, 3 attention) with a
// vocabulary of 300.
std::string write_model(const TempDir& tmp, const std::string& preset = "qwen35-tiny") {
  std::optional<SyntheticSpec> spec = synthetic_preset(preset);
  EXPECT_TRUE(spec.has_value());
  spec->n_vocab = 300;
  return testing::write_synthetic(tmp, *spec);
}

// The config a file's metadata gives.
ModelConfig config_of(const std::string& path) {
  auto file = gguf::GgufFile::open(path);
  EXPECT_TRUE(file.ok());
  auto c = read_model_config(**file);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

bool keep(const gguf::TensorInfo&, std::vector<int64_t>&, std::vector<uint8_t>&, gguf::GgufWriter&) { return true; }

// A copy of the model with `metadata` changed, and the error loading it.
std::string error_with(const TempDir& tmp, const std::function<void(gguf::GgufWriter&)>& metadata) {
  testing::write_gguf_copy(write_model(tmp), tmp.file("bad.gguf"), keep, metadata);
  return load_error(tmp.file("bad.gguf"));
}

TEST(Qwen35Loader, ReadsItsKeys) {
  TempDir tmp;
  const ModelConfig c = config_of(write_model(tmp));
  EXPECT_EQ(c.arch, Architecture::kQwen35);
  EXPECT_TRUE(c.is_hybrid());
  const GatedDeltaNet& g = c.delta_net;
  EXPECT_EQ(g.conv_kernel, 4);
  EXPECT_EQ(g.head_dim, 32);
  EXPECT_EQ(g.k_heads, 2);
  EXPECT_EQ(g.v_heads, 4);
  EXPECT_EQ(g.conv_channels(), 2 * 2 * 32 + 4 * 32);
  EXPECT_EQ(g.recurrent, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(c.n_kv_layer(), 1);
  EXPECT_EQ(c.kv_layer(3), 0);
  EXPECT_EQ(c.n_recurrent_layer(), 3);
  EXPECT_EQ(c.rope_dims, 16);
  EXPECT_EQ(std::vector<int>(c.rope_sections, c.rope_sections + 4), (std::vector<int>{3, 2, 2, 1}));
  EXPECT_EQ(c.rope_layout, RopeLayout::kNeox);
  EXPECT_TRUE(c.has_qk_norm);
  EXPECT_FALSE(c.delta_net.grouped_heads);
  EXPECT_EQ(c.delta_net.key_head(2), 0);  // h mod k_heads
  EXPECT_EQ(load_error(tmp.file("good.gguf")), "loaded");
}

TEST(Qwen35Loader, ReadsWhichLayersRecurFromTheFile) {
  TempDir tmp;
  testing::write_gguf_copy(write_model(tmp), tmp.file("flags.gguf"), keep, [](gguf::GgufWriter& out) {
    out.set_i32_array("qwen35.attention.recurrent_layers", {1, 1, 1, 0});
    out.set_u32("qwen35.full_attention_interval", 2);  // the flags win
  });
  EXPECT_EQ(config_of(tmp.file("flags.gguf")).delta_net.recurrent, (std::vector<bool>{true, true, true, false}));
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

// qwen35moe: the same layers, the FFNs experts beside a gated shared expert.
TEST(Qwen35MoeLoader, ReadsItsExperts) {
  TempDir tmp;
  const std::string good = write_model(tmp, "qwen35moe-tiny");
  const ModelConfig c = config_of(good);
  EXPECT_EQ(c.arch, Architecture::kQwen35Moe);
  EXPECT_TRUE(c.is_hybrid());
  EXPECT_EQ(c.delta_net.recurrent, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(c.n_expert, 8);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff_expert, 128);
  EXPECT_EQ(c.n_ff_shared, 128);
  EXPECT_EQ(c.expert_gating, ExpertGating::kSoftmax);
  EXPECT_TRUE(c.expert_weights_norm);
  EXPECT_EQ(load_error(good), "loaded");
  testing::expect_missing_tensors_named(good, {"blk.1.ffn_gate_inp_shexp.weight", "blk.2.ffn_down_shexp.weight",
                                               "blk.3.ffn_up_exps.weight"});
}

// qwen3next: fused projections per key head, value heads grouped by key
// head, no RoPE sections.
TEST(Qwen3NextLoader, ReadsItsLayout) {
  TempDir tmp;
  const std::string good = write_model(tmp, "qwen3next-tiny");
  const ModelConfig c = config_of(good);
  EXPECT_EQ(c.arch, Architecture::kQwen3Next);
  EXPECT_TRUE(c.is_hybrid());
  EXPECT_TRUE(c.delta_net.grouped_heads);
  EXPECT_EQ(c.delta_net.key_head(1), 0);  // value heads 0, 1 read key head 0; 2, 3 key head 1
  EXPECT_EQ(c.delta_net.key_head(2), 1);
  EXPECT_EQ(std::vector<int>(c.rope_sections, c.rope_sections + 4), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(c.n_ff_shared, 128);
  EXPECT_EQ(load_error(good), "loaded");
  testing::expect_missing_tensors_named(good, {"blk.0.ssm_in.weight", "blk.1.ssm_ba.weight"});
}

// Logits after every token of `tokens`, evaluated in pieces of the given
// sizes one after another in one session.
std::vector<float> logits_in_pieces(Engine& engine, const std::vector<int32_t>& tokens, std::vector<int> pieces) {
  auto session = engine.new_session();
  std::vector<float> all;
  size_t at = 0;
  for (int n : pieces) {
    Status s = session->eval(std::span(tokens).subspan(at, n), /*all_logits=*/true);
    EXPECT_TRUE(s.ok()) << s.message();
    for (int r = 0; r < n; ++r) {
      auto row = session->logits(r);
      all.insert(all.end(), row.begin(), row.end());
    }
    at += n;
  }
  return all;
}

class Qwen35Session : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = Engine::load({.model_path = write_model(tmp_), .n_ctx = 128, .n_threads = 2});
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    engine_ = std::move(*loaded);
    for (int i = 0; i < 40; ++i) tokens_.push_back((i * 37 + 11) % 300);
  }
  // The session's logit rows are those of tokens_[from, 40) in a cold prefill of all 40.
  void expect_cold_rows(const Session& session, int from) {
    const std::vector<float> cold = logits_in_pieces(*engine_, tokens_, {40});
    const size_t n_vocab = engine_->info().n_vocab;
    ASSERT_EQ(session.n_logit_rows(), 40 - from);
    for (int r = 0; r < 40 - from; ++r) {
      auto row = session.logits(r);
      EXPECT_TRUE(std::equal(row.begin(), row.end(), cold.begin() + (from + r) * n_vocab)) << "row " << r;
    }
  }
  TempDir tmp_;
  std::unique_ptr<Engine> engine_;
  std::vector<int32_t> tokens_;
};

// The state carried from one eval to the next gives the bits of one eval
// of everything, however the tokens are split.
TEST_F(Qwen35Session, ContinuingGivesTheBitsOfOnePrefill) {
  const std::vector<float> cold = logits_in_pieces(*engine_, tokens_, {40});
  EXPECT_EQ(logits_in_pieces(*engine_, tokens_, {17, 1, 1, 21}), cold);
  EXPECT_EQ(logits_in_pieces(*engine_, tokens_, {1, 39}), cold);
}

// Two sequences in one batch, each against its own state, give the bits of
// each alone.
TEST_F(Qwen35Session, ABatchOfSequencesGivesEachItsOwnBits) {
  const std::vector<int32_t> other(tokens_.rbegin(), tokens_.rend());
  auto a = engine_->new_session(), b = engine_->new_session();
  ASSERT_TRUE(a->eval(std::span(tokens_).first(10)).ok());
  const Engine::BatchItem items[] = {{a.get(), std::span(tokens_).subspan(10), true}, {b.get(), other, true}};
  ASSERT_TRUE(engine_->eval_batch(items).ok());
  const std::vector<float> alone_a = logits_in_pieces(*engine_, tokens_, {40});
  const std::vector<float> alone_b = logits_in_pieces(*engine_, other, {40});
  const size_t n_vocab = engine_->info().n_vocab;
  for (int r = 0; r < 30; ++r) {
    auto row = a->logits(r);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), alone_a.begin() + (10 + r) * n_vocab)) << "a, row " << r;
  }
  for (int r = 0; r < 40; ++r) {
    auto row = b->logits(r);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), alone_b.begin() + r * n_vocab)) << "b, row " << r;
  }
}

// Going back would need the state of an earlier position, which is gone:
// the eval fails by name instead of answering from the wrong state, and
// from 0 it starts afresh.
TEST_F(Qwen35Session, RefusesToGoBack) {
  auto session = engine_->new_session();
  EXPECT_FALSE(session->can_rewind());
  ASSERT_TRUE(session->eval(tokens_).ok());
  session->truncate(20);
  Status s = session->eval(std::span(tokens_).subspan(20, 1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("recurrent state stands at position 40, not 20"), std::string::npos) << s.message();
  session->truncate(0);
  ASSERT_TRUE(session->eval(tokens_, true).ok());
  const std::vector<float> cold = logits_in_pieces(*engine_, tokens_, {40});
  auto last = session->logits(39);
  EXPECT_TRUE(std::equal(last.begin(), last.end(), cold.end() - last.size()));
}

// A state kept at a position takes the session back there: the tokens
// after it give the bits of a cold prefill. Positions between kept states
// fall back to the one before them.
TEST_F(Qwen35Session, AKeptStateTakesTheSessionBack) {
  auto session = engine_->new_session();
  ASSERT_TRUE(session->eval(std::span(tokens_).first(17)).ok());
  session->keep_recurrent_state();
  ASSERT_TRUE(session->eval(std::span(tokens_).subspan(17)).ok());
  EXPECT_EQ(session->resumable_at(40), 40) << "where the state stands";
  EXPECT_EQ(session->resumable_at(30), 17);
  EXPECT_EQ(session->resumable_at(16), 0);
  EXPECT_TRUE(session->recurrent_state_at(30).empty());
  EXPECT_EQ(session->recurrent_state_at(17).size() * sizeof(float), engine_->info().recurrent_state_bytes);
  session->truncate(17);
  ASSERT_TRUE(session->eval(std::span(tokens_).subspan(17), true).ok());
  expect_cold_rows(*session, 17);
  // Below a kept state, it is gone: the history before it changed.
  session->truncate(10);
  session->truncate(0);
  ASSERT_TRUE(session->eval(std::span(tokens_).first(20)).ok());
  EXPECT_EQ(session->resumable_at(19), 0);
}

// A session keeps at most 4 states, the latest ones.
TEST_F(Qwen35Session, KeepsTheLatestFourStates) {
  auto session = engine_->new_session();
  for (int at = 0; at < 25; at += 5) {
    ASSERT_TRUE(session->eval(std::span(tokens_).subspan(at, 5)).ok());
    session->keep_recurrent_state();
  }
  EXPECT_EQ(session->resumable_at(9), 0) << "the state at 5 was dropped";
  EXPECT_EQ(session->resumable_at(12), 10);
  EXPECT_EQ(session->resumable_at(24), 20);
  EXPECT_FALSE(session->recurrent_state_at(25).empty());
}

// A checkpoint of a hybrid: the attention layers' rows as runs, and the
// state once. Copied into a new session and adopted, it continues with the
// bits of a cold prefill.
TEST_F(Qwen35Session, ACheckpointHoldsTheAttentionRowsAndTheState) {
  const ModelInfo& info = engine_->info();
  EXPECT_EQ(info.n_kv_layer, 1);
  EXPECT_EQ(info.recurrent_state_bytes, 3 * (3 * 256 + 4 * 32 * 32) * sizeof(float));
  EXPECT_EQ(info.session_state_bytes, 5 * info.recurrent_state_bytes) << "the state and 4 copies";
  auto saved = engine_->new_session();
  ASSERT_TRUE(saved->eval(std::span(tokens_).first(25)).ok());
  const std::vector<KvRun> runs = saved->kv_runs();
  ASSERT_EQ(runs.size(), 2u * info.n_kv_layer * info.n_head_kv) << "keys and values of the attention layer";
  size_t width = 0;
  for (const KvRun& r : runs) width += r.bytes_per_position;
  EXPECT_EQ(width, saved->kv_bytes_per_token());
  const std::span<const float> state = saved->recurrent_state_at(25);
  ASSERT_EQ(state.size_bytes(), info.recurrent_state_bytes);

  auto resumed = engine_->new_session();
  const std::vector<KvRun> into = resumed->kv_runs();
  for (size_t r = 0; r < runs.size(); ++r) std::memcpy(into[r].data, runs[r].data, 25 * runs[r].bytes_per_position);
  std::copy(state.begin(), state.end(), resumed->recurrent_state().begin());
  ASSERT_TRUE(resumed->adopt_kv(std::span(tokens_).first(25)).ok());
  ASSERT_TRUE(resumed->eval(std::span(tokens_).subspan(25), true).ok());
  expect_cold_rows(*resumed, 25);
}

// The pool resumes a session only where its state stands: a prompt that
// goes on from everything the pooled session evaluated (its prompt of 25
// and 3 decoded tokens) continues it, bit for bit as a cold prefill; one
// that shares less starts again.
TEST_F(Qwen35Session, PoolResumesOnlyWhereTheStateStands) {
  SessionPool pool(*engine_, 2);
  const std::span<const int32_t> first = std::span(tokens_).first(25);
  SessionPool::Checkout c = pool.checkout(first, nullptr);
  ASSERT_EQ(c.reused, 0);
  ASSERT_TRUE(c.session->eval(first).ok());
  for (int i = 25; i < 28; ++i) ASSERT_TRUE(c.session->eval(std::span(tokens_).subspan(i, 1)).ok());
  pool.checkin(std::move(c.session), {{first.begin(), first.end()}, {}, false});

  SessionPool::Checkout longer = pool.checkout(tokens_, nullptr);
  EXPECT_EQ(longer.reused, 28);
  ASSERT_TRUE(longer.session->eval(std::span(tokens_).subspan(28), true).ok());
  expect_cold_rows(*longer.session, 28);
  pool.checkin(std::move(longer.session), {tokens_, {}, false});

  // Shares 30 tokens with the pooled 40, whose state stands at 40.
  std::vector<int32_t> diverging(tokens_.begin(), tokens_.begin() + 30);
  diverging.push_back(7);
  EXPECT_EQ(pool.peek(diverging), 0);
  SessionPool::Checkout again = pool.checkout(diverging, nullptr);
  EXPECT_EQ(again.reused, 0);
  EXPECT_EQ(again.session->n_past(), 0);
}

// With its state kept at the end of its prompt (as generate() keeps it), a
// pooled session also serves a prompt that shares the prompt but not the
// decoded tokens after it, from the prompt's end.
TEST_F(Qwen35Session, PoolResumesFromAKeptState) {
  SessionPool pool(*engine_, 1);
  const std::span<const int32_t> first = std::span(tokens_).first(25);
  SessionPool::Checkout c = pool.checkout(first, nullptr);
  ASSERT_TRUE(c.session->eval(first).ok());
  c.session->keep_recurrent_state();
  for (int32_t decoded : {3, 5, 8}) ASSERT_TRUE(c.session->eval({&decoded, 1}).ok());
  pool.checkin(std::move(c.session), {{first.begin(), first.end()}, {}, false});

  EXPECT_EQ(pool.peek(tokens_), 25) << "the kept state, not the decoded tokens'";
  SessionPool::Checkout next = pool.checkout(tokens_, nullptr);
  ASSERT_EQ(next.reused, 25);
  ASSERT_EQ(next.session->n_past(), 25);
  ASSERT_TRUE(next.session->eval(std::span(tokens_).subspan(25), true).ok());
  expect_cold_rows(*next.session, 25);
}

}  // namespace
}  // namespace revis
