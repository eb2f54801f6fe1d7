// Resume equivalence: generating after restoring a prompt from RAM or from
// a checkpoint on disk gives bit-identical logits to generating after a
// cold prefill of the same prompt, in both logits modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <fstream>
#include <functional>
#include <mutex>

#include "kvstore/checksum.h"
#include "kvstore/prefix_cache.h"
#include "revis/generate.h"
#include "support/golden.h"
#include "support/kernel_backends.h"
#include "support/spread_tokens.h"
#include "support/testdata.h"

namespace revis::kvstore {
namespace {

using testing::TempDir;
using Tokens = std::vector<int32_t>;

// stem: a model of testdata/models, or "<folder>/<stem>" for one of the
// models/ of a golden set (the architectures kept apart: deepseek2/...,
// and the sets this repository made: gemma4/...).
std::unique_ptr<Engine> load(const std::string& stem, int n_ctx = 512) {
  const size_t slash = stem.find('/');
  const std::filesystem::path path =
      slash == std::string::npos
          ? testing::testdata("models/" + stem + ".gguf")
          : testing::golden_path(testing::golden_set(stem.substr(0, slash + 1)),
                                 "models/" + stem.substr(slash + 1) + ".gguf");
  auto engine = Engine::load({.model_path = path.string(), .n_ctx = n_ctx, .n_threads = 2});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Token ids spread over the vocabulary; the model does not care what they say.
Tokens prompt_tokens(const Engine& engine, int n, int seed) {
  return testing::spread_tokens(engine.info().n_vocab, n, seed);
}

GenerateOptions greedy(bool record_logits) {
  GenerateOptions o;
  o.max_tokens = 6;
  o.sampling.temperature = 0;
  o.ignore_eog = true;
  o.record_logits = record_logits;
  return o;
}

GenerateResult cold(Engine& engine, const Tokens& prompt, bool record_logits) {
  auto session = engine.new_session();
  auto r = generate(engine, *session, prompt, greedy(record_logits), nullptr);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : GenerateResult{};
}

struct Cached {
  GenerateResult result;
  std::string source;
};

Cached through(PrefixCache& cache, Engine& engine, const Tokens& prompt, bool record_logits) {
  auto lease = cache.acquire(prompt);
  EXPECT_TRUE(lease.ok()) << lease.status().message();
  if (!lease.ok()) return {};
  Cached out{{}, lease->source};
  auto r = generate(engine, *lease->session, prompt, greedy(record_logits), nullptr, lease->cached);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  cache.release(std::move(*lease), prompt, r->next_logits);
  out.result = *r;
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Everything after the cached part matches the cold run bit for bit.
void expect_equivalent(const GenerateResult& resumed, const GenerateResult& reference, int n_vocab) {
  EXPECT_TRUE(same_bits(resumed.next_logits, reference.next_logits)) << "logits after the prompt";
  EXPECT_EQ(resumed.generated, reference.generated);
  EXPECT_TRUE(same_bits(resumed.generated_logits, reference.generated_logits)) << "logits of the decoding steps";
  if (reference.prompt_logits.empty()) return;
  const size_t first = static_cast<size_t>(resumed.first_logits_position) * n_vocab;
  ASSERT_LE(first, reference.prompt_logits.size());
  const std::vector<float> tail(reference.prompt_logits.begin() + first, reference.prompt_logits.end());
  EXPECT_TRUE(same_bits(resumed.prompt_logits, tail)) << "prompt logits from position " << resumed.first_logits_position;
}

PrefixCacheOptions disk_options(const TempDir& tmp) {
  return {.ram_sessions = 1, .kv_dir = tmp.path().string(), .save_min_tokens = 64};
}

// A cache over tmp after one that ran `prompt` there (and saved it) has
// gone: nothing in RAM, the checkpoint on disk.
std::unique_ptr<PrefixCache> restarted_with(Engine& engine, const TempDir& tmp, const Tokens& prompt) {
  {
    auto first = PrefixCache::open(engine, disk_options(tmp));
    EXPECT_TRUE(first.ok()) << first.status().message();
    if (first.ok()) through(**first, engine, prompt, false);
  }
  auto second = PrefixCache::open(engine, disk_options(tmp));
  EXPECT_TRUE(second.ok()) << second.status().message();
  return second.ok() ? std::move(*second) : nullptr;
}

TEST(ResumablePrefix, AnyPrefixButTheLastTokenUnlessItsLogitsAreCached) {
  EXPECT_EQ(resumable_prefix(150, 150, 150, true), 150);
  EXPECT_EQ(resumable_prefix(150, 150, 150, false), 149) << "without logits the last token is evaluated again";
  EXPECT_EQ(resumable_prefix(140, 170, 150, true), 140);
  EXPECT_EQ(resumable_prefix(128, 128, 200, true), 127) << "the last prompt token must be evaluated";
  EXPECT_EQ(resumable_prefix(129, 129, 200, true), 128) << "a one-token eval gives the prompt's bits too";
  EXPECT_EQ(resumable_prefix(63, 100, 100, true), 63);
  EXPECT_EQ(resumable_prefix(1, 1, 5, true), 0);
  EXPECT_EQ(resumable_prefix(0, 10, 10, true), 0);
}

TEST(ModelIdentity, CheckpointsRecordTheEnginesFingerprintWithoutReopeningTheModel) {
  // The model is removed once loaded: a second open of it (for a hash, the
  // chat template) would fail, so everything below runs on what Engine::load
  // derived from its one mapping.
  TempDir models, kv;
  const std::string copy = models.file("model.gguf");
  std::filesystem::copy_file(testing::testdata("models/qwen3-Q4_K_M.gguf"), copy);
  auto engine = Engine::load({.model_path = copy, .n_ctx = 512, .n_threads = 2});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  std::filesystem::remove(copy);
  const ModelInfo& info = (*engine)->info();
  ASSERT_EQ(info.digest.rfind("sha256:", 0), 0u);
  EXPECT_EQ(hex64(info.fingerprint), info.digest.substr(7, 16)) << "the KV fingerprint is the node's digest's head";
  {
    auto cache = PrefixCache::open(**engine, disk_options(kv));
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    through(**cache, **engine, prompt_tokens(**engine, 150, 3), false);
  }
  auto cache = PrefixCache::open(**engine, disk_options(kv));
  ASSERT_TRUE(cache.ok());
  ASSERT_EQ((*cache)->store()->entries().size(), 1u);
  EXPECT_EQ((*cache)->store()->entries()[0]->header.model, info.fingerprint);
}

// The parameters: the model (grouped-query attention, DeepSeek's latent
// attention whose cache rows hold no values, and gemma4, whose shared
// layers keep no rows), and record_logits.
class Resume : public ::testing::TestWithParam<std::tuple<std::string, bool>> {
 protected:
  void SetUp() override {
    engine = load(std::get<0>(GetParam()));
    ASSERT_TRUE(engine);
    n_vocab = engine->info().n_vocab;
    prompt = prompt_tokens(*engine, 150, 1);
  }
  std::unique_ptr<Engine> engine;
  int n_vocab = 0;
  Tokens prompt;
};

TEST_P(Resume, WholePromptFromDiskAfterARestart) {
  const bool record = std::get<1>(GetParam());
  TempDir tmp;
  {
    auto first = PrefixCache::open(*engine, disk_options(tmp));
    ASSERT_TRUE(first.ok()) << first.status().message();
    EXPECT_EQ(through(**first, *engine, prompt, record).source, "none");
  }
  // A new cache has nothing in RAM: the rows come from the file.
  auto second = PrefixCache::open(*engine, disk_options(tmp));
  ASSERT_TRUE(second.ok());
  const Cached resumed = through(**second, *engine, prompt, record);
  EXPECT_EQ(resumed.source, "disk");
  EXPECT_EQ(resumed.result.cached_tokens, 150);
  EXPECT_EQ(resumed.result.first_logits_position, 149);
  expect_equivalent(resumed.result, cold(*engine, prompt, record), n_vocab);
}

TEST_P(Resume, SharedPrefixFromDisk) {
  const bool record = std::get<1>(GetParam());
  TempDir tmp;
  {
    auto first = PrefixCache::open(*engine, disk_options(tmp));
    ASSERT_TRUE(first.ok());
    through(**first, *engine, prompt, record);
  }
  Tokens other(prompt.begin(), prompt.begin() + 140);
  for (int32_t t : prompt_tokens(*engine, 30, 2)) other.push_back(t);
  auto second = PrefixCache::open(*engine, disk_options(tmp));
  ASSERT_TRUE(second.ok());
  const Cached resumed = through(**second, *engine, other, record);
  // gemma4's sliding-window rings are state, stored once: its checkpoints
  // serve only prompts that start with all of them (SlidingResume).
  const int shared = engine->info().recurrent_state_bytes > 0 ? 0 : 140;
  EXPECT_EQ(resumed.source, shared > 0 ? "disk" : "none");
  EXPECT_EQ(resumed.result.cached_tokens, shared) << "every shared token";
  EXPECT_EQ(resumed.result.first_logits_position, shared);
  expect_equivalent(resumed.result, cold(*engine, other, record), n_vocab);
}

TEST_P(Resume, SharedPrefixAndWholePromptFromRam) {
  const bool record = std::get<1>(GetParam());
  auto cache = PrefixCache::open(*engine, {.ram_sessions = 2});
  ASSERT_TRUE(cache.ok());
  through(**cache, *engine, prompt, record);
  const Cached again = through(**cache, *engine, prompt, record);
  EXPECT_EQ(again.source, "ram");
  EXPECT_EQ(again.result.cached_tokens, 150);
  expect_equivalent(again.result, cold(*engine, prompt, record), n_vocab);

  Tokens longer = prompt;
  for (int32_t t : prompt_tokens(*engine, 20, 3)) longer.push_back(t);
  const Cached extended = through(**cache, *engine, longer, record);
  EXPECT_EQ(extended.source, "ram");
  EXPECT_EQ(extended.result.cached_tokens, 150);
  expect_equivalent(extended.result, cold(*engine, longer, record), n_vocab);
}

INSTANTIATE_TEST_SUITE_P(LogitsModes, Resume,
                         ::testing::Combine(::testing::Values("qwen3-Q4_K_M", "deepseek2/deepseek2-Q8_0",
                                                              "gemma4/gemma4-Q8_0", "gemma4moe/gemma4moe-Q8_0"),
                                            ::testing::Values(false, true)),
                         [](const auto& info) {
                           std::string model = std::get<0>(info.param);
                           std::replace_if(model.begin(), model.end(), [](char c) { return !isalnum(c); }, '_');
                           return model + (std::get<1>(info.param) ? "_AllLogits" : "_LastLogits");
                         });

// Prompts longer than the forward pass's chunk (256 tokens), resumed where
// the cold prefill's chunks do not start: bit-identical still, on every
// kernel backend the CPU has (each picks its kernels in its own way). A
// mixture's experts meet other tokens beside each one there. A prompt one
// token past a cached prefix evaluates that one token, as decoding would.
TEST(ResumeAcrossChunks, PrefixOfALongPromptFromRam) {
  for (KernelBackend backend : testing::supported_kernel_backends()) {
    const testing::ScopedKernelBackend scoped(backend);
    ASSERT_TRUE(scoped.ok());
    for (const char* model : {"qwen3-Q8_0", "qwen3moe-Q4_0", "deepseek2/deepseek2-Q4_K_M"}) {
      SCOPED_TRACE(std::string(kernel_backend_name(backend)) + " " + model);
      auto engine = load(model);
      ASSERT_TRUE(engine);
      const Tokens prompt = prompt_tokens(*engine, 300, 4);
      Tokens other(prompt.begin(), prompt.begin() + 200);
      for (int32_t t : prompt_tokens(*engine, 90, 5)) other.push_back(t);
      Tokens one_past(prompt.begin(), prompt.begin() + 192);
      one_past.push_back(prompt_tokens(*engine, 1, 6)[0]);
      for (const auto& [next, cached] : {std::pair{other, 200}, std::pair{one_past, 192}}) {
        auto cache = PrefixCache::open(*engine, {.ram_sessions = 1});
        ASSERT_TRUE(cache.ok());
        through(**cache, *engine, prompt, true);
        const Cached resumed = through(**cache, *engine, next, true);
        EXPECT_EQ(resumed.source, "ram");
        EXPECT_EQ(resumed.result.cached_tokens, cached);
        expect_equivalent(resumed.result, cold(*engine, next, true), engine->info().n_vocab);
      }
    }
  }
}

// Logits saved by a request that asked for the last row only serve one
// that asks for every row: the rows are the same bits either way.
TEST(ResumeModes, LogitsOfEitherModeAreReused) {
  auto engine = load("qwen3-Q4_K_M");
  ASSERT_TRUE(engine);
  const Tokens prompt = prompt_tokens(*engine, 150, 1);
  TempDir tmp;
  auto second = restarted_with(*engine, tmp, prompt);
  ASSERT_TRUE(second);
  const Cached resumed = through(*second, *engine, prompt, true);
  EXPECT_EQ(resumed.source, "disk");
  EXPECT_EQ(resumed.result.cached_tokens, 150);
  expect_equivalent(resumed.result, cold(*engine, prompt, true), engine->info().n_vocab);
}

// A session resumed from disk decodes in a batch beside a cold one, each
// with the bits of a cold run alone (engine.h's batch invariance).
TEST(ResumeIntoABatch, RowsFromDiskMeetAColdPromptInOnePass) {
  for (const char* model : {"qwen3-Q4_K_M", "qwen3moe-Q8_0", "deepseek2/deepseek2-Q8_0"}) {
    SCOPED_TRACE(model);
    auto engine = load(model);
    ASSERT_TRUE(engine);
    const int n_vocab = engine->info().n_vocab;
    const Tokens prompt = prompt_tokens(*engine, 150, 1), other = prompt_tokens(*engine, 37, 9);
    Tokens longer = prompt;
    for (int32_t t : prompt_tokens(*engine, 11, 3)) longer.push_back(t);
    // Alone and cold: the rows of the longer prompt's 11 new tokens, the other's rows.
    auto alone = engine->new_session();
    ASSERT_TRUE(alone->eval(longer, true).ok());
    std::vector<float> expected_longer, expected_other;
    for (int r = 150; r < static_cast<int>(longer.size()); ++r)
      expected_longer.insert(expected_longer.end(), alone->logits(r).begin(), alone->logits(r).end());
    auto other_alone = engine->new_session();
    ASSERT_TRUE(other_alone->eval(other, true).ok());
    for (int r = 0; r < static_cast<int>(other.size()); ++r)
      expected_other.insert(expected_other.end(), other_alone->logits(r).begin(), other_alone->logits(r).end());

    TempDir tmp;
    auto second = restarted_with(*engine, tmp, prompt);
    ASSERT_TRUE(second);
    auto lease = second->acquire(longer);
    ASSERT_TRUE(lease.ok()) << lease.status().message();
    ASSERT_EQ(lease->source, "disk");
    ASSERT_EQ(lease->cached.cached_tokens, 150);
    auto cold_session = engine->new_session();
    const std::span<const int32_t> rest = std::span(longer).subspan(150);
    ASSERT_EQ(lease->session->n_past(), 150);
    ASSERT_TRUE(engine->eval_batch(std::vector<Engine::BatchItem>{{lease->session.get(), rest, true},
                                                                   {cold_session.get(), other, true}})
                    .ok());
    std::vector<float> got_longer, got_other;
    for (int r = 0; r < lease->session->n_logit_rows(); ++r)
      got_longer.insert(got_longer.end(), lease->session->logits(r).begin(), lease->session->logits(r).end());
    for (int r = 0; r < cold_session->n_logit_rows(); ++r)
      got_other.insert(got_other.end(), cold_session->logits(r).begin(), cold_session->logits(r).end());
    EXPECT_TRUE(same_bits(got_longer, expected_longer)) << "the resumed session's rows";
    EXPECT_TRUE(same_bits(got_other, expected_other)) << "the cold session's rows";
    second->discard(std::move(*lease));
  }
}

// A damaged checkpoint or another model's never breaks a request: it is
// reported, the session holds none of its rows, and the prompt is evaluated
// cold, bit-identically. Damage in the token ids, in the rows, in the
// header, and a truncated file.
TEST(ResumeModes, DamagedAndForeignCheckpointsFallBackToCold) {
  auto engine = load("qwen3-Q4_K_M");
  ASSERT_TRUE(engine);
  const Tokens prompt = prompt_tokens(*engine, 150, 1);
  const GenerateResult reference = cold(*engine, prompt, false);
  TempDir tmp;
  struct Damage {
    const char* what;
    std::function<void(std::vector<uint8_t>&)> apply;
    const char* why;
  };
  const std::vector<Damage> damages = {
      // Other token ids: the index (built from them) no longer matches the prompt.
      {"token id", [](std::vector<uint8_t>& b) { b[128 + 4 * 20] ^= 1; }, nullptr},
      {"row", [](std::vector<uint8_t>& b) { b[b.size() - 100] ^= 0x55; }, "payload checksum mismatch"},
      {"first row", [&](std::vector<uint8_t>& b) { b[128 + 4 * 150 + 4 * engine->info().n_vocab] ^= 2; },
       "payload checksum mismatch"},
      {"header", [](std::vector<uint8_t>& b) { b[44] ^= 1; }, "header checksum mismatch"},
      {"truncated", [](std::vector<uint8_t>& b) { b.resize(b.size() / 2); }, "truncated"}};
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.what);
    {
      auto first = PrefixCache::open(*engine, disk_options(tmp));
      ASSERT_TRUE(first.ok());
      through(**first, *engine, prompt, false);  // (re)writes the checkpoint
    }
    int files = 0;
    for (const auto& d : std::filesystem::directory_iterator(tmp.path())) {
      std::vector<uint8_t> bytes = testing::read_bytes(d.path());
      damage.apply(bytes);
      std::ofstream(d.path(), std::ios::binary | std::ios::trunc)
          .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      ++files;
    }
    ASSERT_EQ(files, 1);
    std::vector<std::string> warnings;
    PrefixCacheOptions options = disk_options(tmp);
    options.warn = [&](const std::string& m) { warnings.push_back(m); };
    auto second = PrefixCache::open(*engine, options);
    ASSERT_TRUE(second.ok());
    auto lease = (*second)->acquire(prompt);
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(lease->source, "none");
    EXPECT_EQ(lease->session->n_past(), 0) << "nothing of the damaged file is used";
    EXPECT_EQ(lease->cached.cached_tokens, 0);
    if (damage.why) {
      ASSERT_FALSE(warnings.empty());
      EXPECT_NE(warnings[0].find(damage.why), std::string::npos) << warnings[0];
    }
    auto r = generate(*engine, *lease->session, prompt, greedy(false), nullptr, lease->cached);
    ASSERT_TRUE(r.ok());
    expect_equivalent(*r, reference, engine->info().n_vocab);
    (*second)->release(std::move(*lease), prompt, r->next_logits);
  }
  // The damaged file was replaced by a good one; another model ignores it.
  auto other_engine = load("llama-spm-Q4_K_M");
  ASSERT_TRUE(other_engine);
  auto other = PrefixCache::open(*other_engine, disk_options(tmp));
  ASSERT_TRUE(other.ok());
  Tokens other_prompt(prompt);
  for (int32_t& t : other_prompt) t %= other_engine->info().n_vocab;
  EXPECT_EQ(through(**other, *other_engine, other_prompt, false).source, "none");
}

// A checkpoint is written in the background after its request: while the
// write is held, the very session it reads from serves the same prompt
// again and another session serves another prompt; once let go, the file
// is indexed and resumes bit-identically in a new process's cache.
TEST(BackgroundSave, NeitherBlocksTheSessionNorTheNextRequest) {
  auto engine = load("qwen3-Q4_K_M");
  ASSERT_TRUE(engine);
  const Tokens prompt = prompt_tokens(*engine, 150, 1);
  const Tokens short_prompt = prompt_tokens(*engine, 100, 7);  // under save_min_tokens: not saved at release
  TempDir tmp;
  std::mutex mutex;
  std::condition_variable changed;
  bool started = false, let_go = false, held_until_let_go = false;
  PrefixCacheOptions options = disk_options(tmp);
  options.ram_sessions = 2;
  options.save_min_tokens = 128;
  options.before_background_save = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    started = true;
    changed.notify_all();
    held_until_let_go = changed.wait_for(lock, std::chrono::seconds(120), [&] { return let_go; });
  };
  {
    auto cache = PrefixCache::open(*engine, options);
    ASSERT_TRUE(cache.ok());
    EXPECT_EQ(through(**cache, *engine, prompt, false).source, "none");
    {
      std::unique_lock<std::mutex> lock(mutex);
      ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(60), [&] { return started; }));
    }
    const Cached again = through(**cache, *engine, prompt, false);
    EXPECT_EQ(again.source, "ram");
    expect_equivalent(again.result, cold(*engine, prompt, false), engine->info().n_vocab);
    const Cached other = through(**cache, *engine, short_prompt, false);
    EXPECT_EQ(other.source, "none");
    expect_equivalent(other.result, cold(*engine, short_prompt, false), engine->info().n_vocab);
    EXPECT_FALSE((*cache)->store()->contains(prompt)) << "indexed only once written";
    {
      std::lock_guard<std::mutex> lock(mutex);
      let_go = true;
    }
    changed.notify_all();
    (*cache)->wait_for_save();
    EXPECT_TRUE(held_until_let_go) << "the requests above ran while the save was held";
    EXPECT_TRUE((*cache)->store()->contains(prompt));
    EXPECT_GT((*cache)->last_save_ms(), 0);
  }
  auto fresh = PrefixCache::open(*engine, disk_options(tmp));
  ASSERT_TRUE(fresh.ok());
  const Cached resumed = through(**fresh, *engine, prompt, false);
  EXPECT_EQ(resumed.source, "disk");
  EXPECT_EQ(resumed.result.cached_tokens, 150);
  expect_equivalent(resumed.result, cold(*engine, prompt, false), engine->info().n_vocab);
}

// Models with recurrent layers (qwen35, qwen35moe, qwen3next: the golden
// sets of tests/testdata; F16 too, whose exact products show the smallest
// error in a restored state), on the golden "long" prompt (350 tokens: the forward
// pass's chunks end at 256 and 350). Their checkpoints hold the attention
// rows and the recurrent state after the whole prompt, so a prompt resumes
// from one only when it starts with all of it; from RAM, at the end of a
// prompt or of one of its prefill chunks. Every resume gives the bits of a
// cold prefill.
// A model's golden prompt, for the fixtures of models that keep a state
// besides their rows.
struct GoldenPrompt {
  void load(const std::string& golden_case, size_t n_tokens) {
    const testing::GoldenCase golden = testing::load_golden(golden_case);
    auto loaded = Engine::load({.model_path = golden.model_file, .n_ctx = 512, .n_threads = 2});
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    engine = std::move(*loaded);
    ASSERT_GT(engine->info().recurrent_state_bytes, 0u);
    prompt = golden.prompt_tokens;
    ASSERT_EQ(prompt.size(), n_tokens);
  }
  // The prompt's first n tokens, then `extra` others.
  Tokens prefix(int n, int extra = 0, int seed = 5) const {
    Tokens t(prompt.begin(), prompt.begin() + n);
    for (int32_t id : prompt_tokens(*engine, extra, seed)) t.push_back(id);
    return t;
  }
  void expect_cold_bits(const Cached& resumed, const Tokens& p) {
    expect_equivalent(resumed.result, cold(*engine, p, true), engine->info().n_vocab);
  }
  // The whole prompt saved, then resumed after a restart: a file of
  // `version` with the rows per position and the state once, and the
  // bits of a cold prefill.
  void whole_prompt_from_disk(uint32_t version) {
    TempDir tmp;
    auto second = restarted_with(*engine, tmp, prompt);
    ASSERT_TRUE(second);
    ASSERT_EQ(second->store()->entries().size(), 1u);
    const StoreEntry& entry = *second->store()->entries()[0];
    const ModelInfo& info = engine->info();
    const int n = static_cast<int>(prompt.size());
    EXPECT_EQ(entry.header.version, version);
    EXPECT_EQ(entry.header.shape.recurrent_bytes, info.recurrent_state_bytes);
    EXPECT_EQ(entry.header.shape.state_bytes, info.kv_state_bytes_per_token);
    EXPECT_EQ(entry.bytes, kCheckpointHeaderBytes + n * (4 + info.kv_bytes_per_token) + 4 * info.n_vocab +
                               info.recurrent_state_bytes)
        << "the rows per position, the state once";
    const Cached resumed = through(*second, *engine, prompt, true);
    EXPECT_EQ(resumed.source, "disk");
    EXPECT_EQ(resumed.result.cached_tokens, n);
    EXPECT_EQ(resumed.result.first_logits_position, n - 1);
    expect_cold_bits(resumed, prompt);
  }
  // After the prompt ran in a pool of one session, each case's prompt
  // resumes from RAM with `cached` tokens (0: from none, cold), giving a
  // cold prefill's bits.
  struct RamCase {
    Tokens next;
    int cached;
  };
  void from_ram(const std::vector<RamCase>& cases) {
    for (const RamCase& c : cases) {
      SCOPED_TRACE(std::to_string(c.next.size()) + " tokens");
      auto cache = PrefixCache::open(*engine, {.ram_sessions = 1});
      ASSERT_TRUE(cache.ok());
      through(**cache, *engine, prompt, true);
      const Cached resumed = through(**cache, *engine, c.next, true);
      EXPECT_EQ(resumed.source, c.cached > 0 ? "ram" : "none");
      EXPECT_EQ(resumed.result.cached_tokens, c.cached);
      expect_cold_bits(resumed, c.next);
    }
  }
  std::unique_ptr<Engine> engine;
  Tokens prompt;
};

class HybridResume : public ::testing::TestWithParam<std::string>, protected GoldenPrompt {
 protected:
  void SetUp() override { load(GetParam(), 350); }
};

TEST_P(HybridResume, WholePromptFromDiskAfterARestart) { whole_prompt_from_disk(kRecurrentFormatVersion); }

// A checkpoint inside the forward pass's first chunk (100 tokens) and one
// past it (300): the rest of the prompt is evaluated from the stored state.
TEST_P(HybridResume, ALongerPromptFromDiskInsideAndAcrossChunks) {
  for (int saved : {100, 300}) {
    SCOPED_TRACE("a checkpoint of " + std::to_string(saved) + " tokens");
    TempDir tmp;
    auto second = restarted_with(*engine, tmp, prefix(saved));
    ASSERT_TRUE(second);
    const Cached resumed = through(*second, *engine, prompt, true);
    EXPECT_EQ(resumed.source, "disk");
    EXPECT_EQ(resumed.result.cached_tokens, saved);
    EXPECT_EQ(resumed.result.first_logits_position, saved);
    expect_cold_bits(resumed, prompt);
  }
}

// A prompt that leaves a checkpoint before its end cannot use it (the state
// inside it is not stored), but uses a shorter checkpoint it starts with.
TEST_P(HybridResume, ADivergingPromptResumesOnlyFromAWholeCheckpoint) {
  TempDir tmp;
  {
    auto first = PrefixCache::open(*engine, disk_options(tmp));
    ASSERT_TRUE(first.ok());
    through(**first, *engine, prefix(300), false);
  }
  const Tokens diverging = prefix(200, 30);
  {
    auto second = PrefixCache::open(*engine, disk_options(tmp));
    ASSERT_TRUE(second.ok());
    const Cached none = through(**second, *engine, diverging, true);
    EXPECT_EQ(none.source, "none") << "shares 200 tokens with a checkpoint of 300";
    EXPECT_EQ(none.result.cached_tokens, 0);
    expect_cold_bits(none, diverging);
    through(**second, *engine, prefix(100), false);  // saved at the end, as the diverging prompt is
  }
  // On disk: 300, 230 (the diverging prompt) and 100 tokens; this one
  // shares 200 with the first two and starts with the third.
  const Tokens another = prefix(200, 30, 9);
  auto third = PrefixCache::open(*engine, disk_options(tmp));
  ASSERT_TRUE(third.ok());
  ASSERT_EQ((*third)->store()->entries().size(), 3u);
  const Cached resumed = through(**third, *engine, another, true);
  EXPECT_EQ(resumed.source, "disk");
  EXPECT_EQ(resumed.result.cached_tokens, 100) << "the checkpoint of 100 it starts with";
  expect_cold_bits(resumed, another);
}

// From RAM: the same prompt again (the state kept at its end), a prompt
// leaving it after the first chunk (the state kept at 256), and one going
// on past it (where the state stands after the prompt).
TEST_P(HybridResume, FromRamAtThePromptsEndAndItsChunks) {
  from_ram({{prompt, 350}, {prefix(300, 20), 256}, {prefix(350, 12, 8), 350}});
}

// Damage in the stored state, or a file cut short of it: the checkpoint is
// refused by name, and the prompt evaluated cold, bit-identically.
TEST_P(HybridResume, ADamagedStateFallsBackToCold) {
  const std::vector<std::pair<std::function<void(std::vector<uint8_t>&)>, const char*>> damages = {
      {[](std::vector<uint8_t>& b) { b[b.size() - 3] ^= 0x20; }, "payload checksum mismatch"},
      {[](std::vector<uint8_t>& b) { b.resize(b.size() - 8); }, "truncated"}};
  for (const auto& [apply, why] : damages) {
    SCOPED_TRACE(why);
    TempDir tmp;
    {
      auto first = PrefixCache::open(*engine, disk_options(tmp));
      ASSERT_TRUE(first.ok());
      through(**first, *engine, prompt, false);
    }
    for (const auto& d : std::filesystem::directory_iterator(tmp.path())) {
      std::vector<uint8_t> bytes = testing::read_bytes(d.path());
      apply(bytes);
      std::ofstream(d.path(), std::ios::binary | std::ios::trunc)
          .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    std::vector<std::string> warnings;
    PrefixCacheOptions options = disk_options(tmp);
    options.warn = [&](const std::string& m) { warnings.push_back(m); };
    auto second = PrefixCache::open(*engine, options);
    ASSERT_TRUE(second.ok());
    const Cached resumed = through(**second, *engine, prompt, true);
    EXPECT_EQ(resumed.source, "none");
    EXPECT_EQ(resumed.result.cached_tokens, 0);
    ASSERT_FALSE(warnings.empty());
    EXPECT_NE(warnings[0].find(why), std::string::npos) << warnings[0];
    expect_cold_bits(resumed, prompt);
  }
}

INSTANTIATE_TEST_SUITE_P(GoldenPrompts, HybridResume,
                         ::testing::Values("qwen35/qwen35-Q8_0.long", "qwen35/qwen35-F16.long",
                                           "qwen35moe/qwen35moe-Q8_0.long", "qwen35moe/qwen35moe-F16.long",
                                           "qwen3next/qwen3next-F16.long"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !isalnum(c); }, '_');
                           return name;
                         });

// deepseek4 (../shared/testdata/deepseek4's F16 file, its golden "long"
// prompt of 352 tokens: two groups of its ratio-128 blocks close in it).
// Its compressors keep their state compactly (model/compressor_cache.h):
// a checkpoint (version 4) serves its whole prompt, or a shorter shared
// prefix from the resume point at or below it (a multiple of 128), the
// rest evaluated; from RAM the same, or from where the session stands.
// Every resume gives the bits of a cold prefill.
class Deepseek4Resume : public ::testing::Test, protected GoldenPrompt {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(load("deepseek4/deepseek4-F16.long", 352));
    ASSERT_EQ(engine->info().kv_resume_interval, 128);
  }
};

// Blocks 1 and 3 compress by 4 (keys and indexer keys of 64), 2 and 4 by
// 128 (keys of 64): per token the raw rows (5 blocks x 64 halves), the
// keys per group and ratio 4's resume copies (4 rows of 64 parts and 64
// scores, for both compressors, every 128 positions); once, the tail of
// the open groups.
TEST_F(Deepseek4Resume, BytesPerTokenFollowTheCompactLayout) {
  const ModelInfo& info = engine->info();
  EXPECT_EQ(info.kv_state_bytes_per_token,
            2u * (64 * 2 / 4 + 64 * 2 / 4 + 2 * (2 * 4 * 64 * 4 / 128)) + 2u * (64 * 2 / 128));
  EXPECT_EQ(info.kv_bytes_per_token, 5u * 64 * 2 + info.kv_state_bytes_per_token);
  EXPECT_EQ(info.recurrent_state_bytes, (2u * 2 * 8 * (128 + 128) + 2u * 2 * 128 * 64) * sizeof(float));
}

TEST_F(Deepseek4Resume, WholePromptFromDiskIsAVersion4File) { whole_prompt_from_disk(kCompressorFormatVersion); }

// A prompt sharing 300 tokens with a checkpoint resumes at 256 (not a
// resume point: the one below), one sharing 256 at 256, one sharing 200
// at 128; a checkpoint of 300 tokens serves its whole prompt from its tail.
TEST_F(Deepseek4Resume, APrefixFromDiskResumesFromTheResumePointBelow) {
  struct Case {
    Tokens saved, next;
    int cached;
  };
  for (const Case& c : {Case{prompt, prefix(300, 20), 256}, Case{prompt, prefix(256, 20), 256},
                        Case{prompt, prefix(200, 12), 128}, Case{prefix(300, 0), prompt, 300}}) {
    SCOPED_TRACE(std::to_string(c.saved.size()) + " tokens saved, " + std::to_string(c.next.size()) + " asked");
    TempDir tmp;
    auto second = restarted_with(*engine, tmp, c.saved);
    ASSERT_TRUE(second);
    const Cached resumed = through(*second, *engine, c.next, true);
    EXPECT_EQ(resumed.source, "disk");
    EXPECT_EQ(resumed.result.cached_tokens, c.cached);
    expect_cold_bits(resumed, c.next);
  }
}

// From RAM: the same prompt again (its tail kept at its end), a prompt
// leaving it at 300 (resumed at 256), and one going on past it (where the
// session stands after the prompt and its decoded tokens).
TEST_F(Deepseek4Resume, FromRamAtAResumePointOrWhereTheSessionStands) {
  from_ram({{prompt, 352}, {prefix(300, 20), 256}, {prefix(352, 12, 8), 352}});
}

// Models with sliding-window layers (gemma3, gpt-oss: the golden sets of
// tests/testdata, windows of 32), whose rings (384 rows) a prompt of 700
// tokens wraps almost twice. A checkpoint holds the global layers' rows
// and the rings after the whole prompt, so it is used only whole; from
// RAM a session goes back as far as its rings still hold the window (353
// positions here), else the prompt is evaluated cold. Every resume gives
// the bits of a cold prefill.
class SlidingResume : public ::testing::TestWithParam<std::string>, protected GoldenPrompt {
 protected:
  void SetUp() override {
    engine = kvstore::load(GetParam(), 1024);
    ASSERT_TRUE(engine);
    ASSERT_GT(engine->info().recurrent_state_bytes, 0u);
    prompt = prompt_tokens(*engine, 700, 3);
  }
};

TEST_P(SlidingResume, WholePromptFromDiskAfterARestart) { whole_prompt_from_disk(kRecurrentFormatVersion); }

TEST_P(SlidingResume, ALongerPromptFromDiskButNotADivergingOne) {
  TempDir tmp;
  auto second = restarted_with(*engine, tmp, prefix(500));
  ASSERT_TRUE(second);
  const Cached resumed = through(*second, *engine, prompt, true);
  EXPECT_EQ(resumed.source, "disk");
  EXPECT_EQ(resumed.result.cached_tokens, 500);
  expect_cold_bits(resumed, prompt);

  TempDir other;
  auto third = restarted_with(*engine, other, prompt);
  ASSERT_TRUE(third);
  const Tokens diverging = prefix(600, 20);
  const Cached none = through(*third, *engine, diverging, true);
  EXPECT_EQ(none.source, "none") << "shares 600 tokens with a checkpoint of 700";
  expect_cold_bits(none, diverging);
}

// From RAM, after the prompt and 6 generated tokens (the rings stand at
// 706 and hold from 322 on): the prompt again, a prompt going on past it,
// one leaving it at 600 (its window among the rings' rows) and one leaving
// it at 200 (lost: cold).
TEST_P(SlidingResume, FromRamWhileTheRingsHoldTheWindow) {
  from_ram({{prompt, 700}, {prefix(700, 12, 8), 700}, {prefix(600, 20), 600}, {prefix(200, 20), 0}});
}

INSTANTIATE_TEST_SUITE_P(GoldenModels, SlidingResume,
                         ::testing::Values("gemma3/gemma3-Q8_0", "gemma3/gemma3-F16", "gpt-oss/gpt-oss-Q8_0"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !isalnum(c); }, '_');
                           return name;
                         });

}  // namespace
}  // namespace revis::kvstore
