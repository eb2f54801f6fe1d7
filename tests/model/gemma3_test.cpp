// Gemma 3 beyond the golden cases (tests/testdata/gemma3): hostile files are
// refused by name (a window of 0, a missing tensor), a sliding-window layer
// really forgets what lies behind its window, the rope scaling and pattern
// keys are read, and a prompt evaluated in pieces gives the bits of one
// evaluated whole (what prefix reuse relies on).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/config.h"
#include "tools/synthetic.h"
#include "revis/engine.h"
#include "support/testdata.h"

namespace revis {
namespace {

using testing::TempDir;

// A small gemma3 file: window `window`, one global layer in every `pattern`.
std::string write_model(const TempDir& tmp, int layers, int window, int pattern,
                        const std::string& name = "m.gguf") {
  std::optional<SyntheticSpec> spec = synthetic_preset("gemma3-small");
  EXPECT_TRUE(spec.has_value());
  spec->n_layer = layers;
  spec->sliding_window = window;
  spec->sliding_pattern = pattern;
  ThreadPool pool(2);
  const std::string path = tmp.file(name);
  Status s = write_synthetic_model(*spec, path, pool, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return path;
}

// Copies `from` to `to`, dropping the tensor `drop` and letting `metadata` override keys.
void write_copy(const std::string& from, const std::string& to, const std::string& drop,
                const std::function<void(gguf::GgufWriter&)>& metadata) {
  auto in = gguf::GgufFile::open(from);
  ASSERT_TRUE(in.ok()) << in.status().message();
  gguf::GgufWriter out;
  out.copy_metadata(**in);
  if (metadata) metadata(out);
  for (const gguf::TensorInfo& t : (*in)->tensors())
    if (t.name != drop) ASSERT_TRUE(out.add_tensor(t.name, t.type, t.dims, t.data, t.n_bytes).ok()) << t.name;
  ASSERT_TRUE(out.write(to).ok());
}

std::string load_error(const std::string& path) {
  auto engine = Engine::load({.model_path = path, .n_ctx = 64, .n_threads = 2});
  return engine.ok() ? std::string("loaded") : engine.status().message();
}

TEST(Gemma3Loader, ReadsTheLocalLayersAndTheirRope) {
  TempDir tmp;
  auto file = gguf::GgufFile::open(write_model(tmp, 6, 32, 3));
  ASSERT_TRUE(file.ok());
  auto c = read_model_config(**file);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Architecture::kGemma3);
  EXPECT_EQ(c->sliding.window, 32);
  EXPECT_EQ(c->rope_layout, RopeLayout::kNeox);
  EXPECT_FLOAT_EQ(c->rope_freq_scale, 1.0f / 8);  // linear scaling of the global layers
  EXPECT_FLOAT_EQ(c->sliding.rope_base, 10000.0f);
  EXPECT_FLOAT_EQ(c->rope_base, 1e6f);
  const std::vector<bool> local = {true, true, false, true, true, false};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c->sliding.is_local(i), local[i]) << "layer " << i;
}

TEST(Gemma3Loader, RefusesAWindowOfZero) {
  TempDir tmp;
  const std::string good = write_model(tmp, 2, 32, 6);
  write_copy(good, tmp.file("bad.gguf"), "",
             [](gguf::GgufWriter& out) { out.set_u32("gemma3.attention.sliding_window", 0); });
  const std::string error = load_error(tmp.file("bad.gguf"));
  EXPECT_NE(error.find("bad.gguf"), std::string::npos) << error;
  EXPECT_NE(error.find("gemma3.attention.sliding_window: 0"), std::string::npos) << error;
}

TEST(Gemma3Loader, RefusesAPatternOfZero) {
  TempDir tmp;
  const std::string good = write_model(tmp, 2, 32, 6);
  write_copy(good, tmp.file("bad.gguf"), "",
             [](gguf::GgufWriter& out) { out.set_u32("gemma3.attention.sliding_window_pattern", 0); });
  EXPECT_NE(load_error(tmp.file("bad.gguf")).find("gemma3.attention.sliding_window_pattern: 0"), std::string::npos);
}

TEST(Gemma3Loader, NamesAMissingTensor) {
  for (const std::string name : {"blk.1.post_ffw_norm.weight", "blk.0.post_attention_norm.weight",
                                 "blk.1.attn_q_norm.weight", "blk.0.ffn_gate.weight"}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    const std::string good = write_model(tmp, 2, 32, 6);
    write_copy(good, tmp.file("bad.gguf"), name, nullptr);
    const std::string error = load_error(tmp.file("bad.gguf"));
    EXPECT_NE(error.find("tensor '" + name + "' is missing"), std::string::npos) << error;
  }
}

std::vector<float> last_logits(Engine& engine, const std::vector<int32_t>& tokens) {
  auto session = engine.new_session();
  Status s = session->eval(tokens);
  EXPECT_TRUE(s.ok()) << s.message();
  return std::vector<float>(session->logits(0).begin(), session->logits(0).end());
}

// With only local layers (the pattern longer than the model), a token sees
// at most layers * (window - 1) positions back: what lies before cannot
// change its logits. With a global layer it does.
TEST(Gemma3Attention, LocalLayersForgetWhatLiesBehindTheirWindow) {
  TempDir tmp;
  const std::string local = write_model(tmp, 2, 8, 100, "local.gguf");
  const std::string global = write_model(tmp, 2, 8, 2, "global.gguf");
  std::vector<int32_t> a(40), b;
  for (int i = 0; i < 40; ++i) a[i] = 3 + (i * 37) % 200;
  b = a;
  b[0] = 250, b[5] = 251, b[20] = 252;  // 19 positions or more before the last: 2 * 7 = 14 reach back
  for (const auto& [path, same] : {std::pair{local, true}, std::pair{global, false}}) {
    SCOPED_TRACE(path);
    auto engine = Engine::load({.model_path = path, .n_ctx = 64, .n_threads = 2});
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    EXPECT_EQ(last_logits(**engine, a) == last_logits(**engine, b), same);
  }
}

// A prompt evaluated in pieces (the window crossing their borders, as a
// resumed prefix continues) gives the bits of the prompt evaluated whole.
TEST(Gemma3Attention, PiecesGiveTheBitsOfTheWhole) {
  TempDir tmp;
  const std::string path = write_model(tmp, 6, 32, 6);
  auto engine = Engine::load({.model_path = path, .n_ctx = 256, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  std::vector<int32_t> tokens(150);
  for (int i = 0; i < 150; ++i) tokens[i] = 3 + (i * 53) % 250;
  const std::vector<float> whole = last_logits(**engine, tokens);
  auto session = (*engine)->new_session();
  for (int start = 0; start < 150; start += 64) {
    const int len = std::min(64, 150 - start);
    ASSERT_TRUE(session->eval(std::span(tokens).subspan(start, len)).ok());
  }
  EXPECT_EQ(std::vector<float>(session->logits(0).begin(), session->logits(0).end()), whole);
}

}  // namespace
}  // namespace revis
