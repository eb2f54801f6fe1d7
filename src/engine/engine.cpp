#include "revis/engine.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "engine/engine_impl.h"
#include "engine/model_digest.h"
#include "tokenizer/tokenizer.h"

namespace revis {

namespace {

#ifdef MADV_HUGEPAGE
// MemAvailable from /proc/meminfo, in bytes; 0 where it cannot be read.
uint64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib << 10;
  return 0;
}
#endif

// Locks what the model reads its weights from: the file's tensor data
// (but for the tensors given back for stripes; the header is read once at
// load and need not stay resident) and the stripes. Returns why it failed,
// or "". The lock lasts until the memory is unmapped.
std::string lock_weights(const Model& model) {
  std::vector<std::pair<const uint8_t*, size_t>> spans;
  for (const gguf::TensorInfo& t : model.file().tensors())
    if (t.n_bytes > 0 && !model.reads_in_stripes(t)) spans.emplace_back(t.data, t.n_bytes);
  const HugePageMemory& stripes = model.striped_memory();
  if (!stripes.empty()) spans.emplace_back(stripes.data(), stripes.size());
  // mlock wants page-aligned addresses on some systems; round outwards.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  size_t locked = 0;
  for (const auto& [begin, bytes] : spans) {
    const uintptr_t first = reinterpret_cast<uintptr_t>(begin) & ~(page - 1);
    const uintptr_t last = reinterpret_cast<uintptr_t>(begin) + bytes;
    if (::mlock(reinterpret_cast<const void*>(first), last - first) != 0) {
      const int err = errno;
      std::string why = "mlock of " + std::to_string((locked + bytes) >> 20) + " MiB failed: " + std::strerror(err);
      if (err == ENOMEM || err == EPERM) why += " (raise the locked-memory limit: ulimit -l)";
      return why;
    }
    locked += bytes;
  }
  return {};
}

// Where Engine::load puts the weights (EngineOptions::weights).
gguf::Placement choose_placement(const std::string& path, WeightMemory weights) {
  if (weights == WeightMemory::kMap) return gguf::Placement::kMap;
  if (weights == WeightMemory::kCopy) return gguf::Placement::kCopy;
#ifdef MADV_HUGEPAGE
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return gguf::Placement::kMap;  // open() reports why
  const uint64_t available = available_memory_bytes();
  return available > 0 && static_cast<uint64_t>(st.st_size) <= available / 10 * 6 ? gguf::Placement::kCopy
                                                                                 : gguf::Placement::kMap;
#else
  (void)path;
  return gguf::Placement::kMap;  // no huge pages to gain from a copy
#endif
}

// The ModelInfo fields read from the file and the tokenizer rather than the
// model's shape: identity, chat template, special tokens, weight types. The
// template and the file type are optional and only described: a key of the
// wrong type reads as absent rather than failing the load.
void describe_file(const gguf::GgufFile& file, const Tokenizer& tokenizer, ModelInfo& info) {
  info.digest = model_digest(file.bytes());
  info.fingerprint = model_fingerprint(info.digest);
  if (auto source = file.get_string("tokenizer.chat_template"); source.ok()) info.chat_template = std::move(*source);
  auto special = [&](int32_t id) { return id < 0 ? SpecialToken{} : SpecialToken{id, tokenizer.token_text(id)}; };
  info.bos = special(tokenizer.bos());
  info.eos = special(tokenizer.eos());
  info.eot = special(tokenizer.eot());
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id)
    if (tokenizer.is_end_of_generation(id)) info.eog_tokens.push_back(id);
  if (auto file_type = file.get_int("general.file_type", -1); file_type.ok()) info.file_type = *file_type;
  for (const gguf::TensorInfo& t : file.tensors()) info.tensor_bytes_by_type[type_name(t.type)] += t.n_bytes;
}

// The GPU index EngineOptions::device names, or -1 for the CPU.
Result<int> device_index(const std::string& device) {
  if (device.empty() || device == "cpu") return -1;
  if (device == "vulkan") return 0;
  const std::string prefix = "vulkan:";
  if (device.rfind(prefix, 0) == 0 && device.size() > prefix.size() && device.size() <= prefix.size() + 3 &&
      device.find_first_not_of("0123456789", prefix.size()) == std::string::npos)
    return std::stoi(device.substr(prefix.size()));
  return Status::error("--device " + device + ": expected cpu, vulkan or vulkan:N");
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  if (options.n_ctx < 0) return Status::error("context size: " + std::to_string(options.n_ctx) + " (expected >= 0)");
  if (options.n_threads < 0 || options.n_threads > 1024)
    return Status::error("threads: " + std::to_string(options.n_threads) + " (expected 0..1024)");
  auto gpu_index = device_index(options.device);
  if (!gpu_index.ok()) return gpu_index.status();
  auto file = gguf::GgufFile::open(options.model_path, choose_placement(options.model_path, options.weights));
  if (!file.ok()) return file.status();
  auto impl = std::make_unique<Impl>();
  impl->file = std::shared_ptr<const gguf::GgufFile>(std::move(*file));
  auto model = Model::load(impl->file);
  if (!model.ok()) return model.status();
  impl->model = std::move(*model);
  auto tokenizer = Tokenizer::from_gguf(*impl->file);
  if (!tokenizer.ok()) return tokenizer.status().with_context(options.model_path);
  impl->tokenizer = std::move(*tokenizer);
  const ModelConfig& c = impl->model->config();
  if (impl->tokenizer->n_vocab() != c.n_vocab)
    return Status::error(options.model_path + ": tokenizer.ggml.tokens has " +
                         std::to_string(impl->tokenizer->n_vocab()) + " entries but token_embd.weight has " +
                         std::to_string(c.n_vocab) + " rows");

  ModelInfo& info = impl->info;
  info.path = options.model_path;
  info.architecture = architecture_name(c.arch);
  info.name = c.name;
  info.n_vocab = c.n_vocab;
  info.n_ctx_train = c.n_ctx_train;
  info.n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min(c.n_ctx_train, 4096);
  info.rope_freq_scale = c.rope_freq_scale;
  info.n_layer = c.n_layer;
  info.n_embd = c.n_embd;
  info.has_mtp = impl->model->has_nextn();
  // The layers kept by position (a sliding-window layer's ring is state).
  for (const KvCache::LayerShape& layer : KvCache::layer_shapes(c, 1)) {
    if (layer.ring) continue;
    if (info.n_kv_layer++ > 0) continue;
    info.n_head_kv = layer.n_head_kv;
    info.head_dim_k = layer.dim_k;
    info.head_dim_v = layer.dim_v;
  }
  info.recurrent_state_bytes = KvCache::state_bytes(c);
  // A hybrid's session keeps copies of its state; rings are kept once.
  info.session_state_bytes = (c.is_hybrid() ? 1 + RecurrentSnapshots::kMax : 1) * info.recurrent_state_bytes;
  if (c.is_hybrid()) info.draft_state_bytes = info.recurrent_state_bytes;
  // A checkpoint with a hybrid's state or rings resumes whole only.
  if (info.recurrent_state_bytes > 0) info.kv_resume_interval = 0;
  if (CompressorCache::needed(c)) {
    info.kv_state_bytes_per_token = CompressorCache::bytes_per_position(c);
    info.recurrent_state_bytes = CompressorCache::tail_bytes(c);
    // The ring, the kept copies of its tail, and the two a checkpoint's
    // read and write go through.
    info.session_state_bytes =
        CompressorCache::ring_bytes(c) + (RecurrentSnapshots::kMax + 2) * info.recurrent_state_bytes;
    info.kv_resume_interval = CompressorCache::resume_interval_of(c);
  }
  info.kv_bytes_per_token = KvCache::bytes_per_position(c);
  if (options.share_threads) impl->pool = options.share_threads->impl_->pool;
  info.n_threads = impl->pool                 ? impl->pool->size()
                   : options.n_threads > 0 ? options.n_threads
                                           : ThreadPool::default_threads();
  info.file_bytes = impl->file->file_size();
  info.weights_copied = impl->file->placement() == gguf::Placement::kCopy;
  info.bytes_per_token = impl->model->bytes_per_token();
  describe_file(*impl->file, *impl->tokenizer, info);
  if (*gpu_index >= 0) {
    auto device = gpu::Device::open(*gpu_index);
    if (!device.ok()) return device.status();
    info.device = (*device)->info().name;
    auto placed = impl->model->offload(std::move(*device), options.gpu_layers, options.device_memory, info.n_ctx);
    if (!placed.ok()) return placed.status().with_context(options.model_path);
    info.gpu_layers = placed->layers;
    info.gpu_output = placed->output;
    info.device_bytes = placed->bytes;
    const gpu::Device* used = impl->model->device();
    info.device_memory_bytes = options.device_memory > 0 ? options.device_memory : used ? used->info().memory_bytes : 0;
    info.device_kv_bytes_per_token = static_cast<uint64_t>(placed->layers) * info.n_head_kv *
                                     (info.head_dim_k + info.head_dim_v) * sizeof(uint16_t);
    info.device_warnings = placed->warnings;
  }
  if (info.weights_copied) {
    // After describe_file: the model digest reads the file's copy, whose
    // striped matrices are given back here.
    auto striped = impl->model->keep_weights_in_stripes();
    if (!striped.ok()) return striped.status();
    info.striped_matrices = *striped;
  }
  if (options.mlock) info.mlock_failure = lock_weights(*impl->model);
  if (!impl->pool) impl->pool = std::make_shared<ThreadPool>(info.n_threads);
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }
const Tokenizer& engine_tokenizer(const Engine& engine) { return *engine.impl_->tokenizer; }

std::vector<int32_t> Engine::tokenize(std::string_view text, bool add_bos, bool parse_special) const {
  return impl_->tokenizer->encode(text, add_bos, parse_special);
}
std::vector<int32_t> Engine::tokenize_template(std::string_view text, bool add_bos,
                                               std::span<const TextSpan> literal) const {
  return impl_->tokenizer->encode_template(text, add_bos, literal);
}
bool Engine::add_bos_default() const { return impl_->tokenizer->add_bos_default(); }
std::string Engine::token_bytes(int32_t id, bool render_control) const {
  return impl_->tokenizer->token_to_piece(id, render_control);
}
std::string Engine::token_text(int32_t id) const { return impl_->tokenizer->token_text(id); }
std::optional<int32_t> Engine::find_token(std::string_view text) const { return impl_->tokenizer->find_token(text); }
bool Engine::is_control(int32_t id) const { return impl_->tokenizer->is_control(id); }
bool Engine::is_end_of_generation(int32_t id) const { return impl_->tokenizer->is_end_of_generation(id); }

std::unique_ptr<Session> Engine::new_session() { return std::unique_ptr<Session>(new Session(*this)); }

Session::Session(Engine& engine)
    : engine_(engine),
      state_(new State{KvCache(engine.impl_->model->config(), engine.impl_->info.n_ctx), {}, 0, {}, {}, {}, {}, 0, 1, {}, {}, false}) {}
Session::~Session() = default;

int Session::n_ctx() const { return state_->kv.n_ctx(); }

Status Session::eval(std::span<const int32_t> tokens, bool all_logits) {
  const Engine::BatchItem item{this, tokens, all_logits};
  return engine_.eval_batch({&item, 1});
}

Status Engine::eval_batch(std::span<const BatchItem> items) {
  std::vector<Model::SequenceInput> batch;
  batch.reserve(items.size());
  for (const BatchItem& item : items) {
    if (!item.session || &item.session->engine_ != this)
      return Status::error("eval_batch: an item's session is missing or belongs to another engine");
    if (Status s = item.session->catch_up(); !s.ok()) return s;
    Session::State& st = *item.session->state_;
    batch.push_back({item.tokens, item.session->n_past(), &st.kv, item.all_logits, &st.logits,
                     st.hidden.empty() ? nullptr : st.hidden.data(),
                     item.session->recent_destinations(static_cast<int>(item.tokens.size()))});
  }
  if (Status s = impl_->model->forward(batch, *impl_->pool); !s.ok()) return s;
  for (const BatchItem& item : items) item.session->appended(item.tokens, item.all_logits);
  return {};
}

void Session::appended(std::span<const int32_t> tokens, bool all_logits) {
  State& st = *state_;
  st.rows = all_logits ? static_cast<int>(tokens.size()) : 1;
  if (!st.hidden.empty()) std::fill_n(st.hidden_known.begin() + n_past(), tokens.size(), true);
  history_.insert(history_.end(), tokens.begin(), tokens.end());
}

void Session::keep_recent_states(int positions) {
  State& st = *state_;
  if (!engine_.impl_->model->config().is_hybrid() || positions <= st.recent_slots) return;
  st.recent_slots = positions;
  st.recent.assign(static_cast<size_t>(positions) * st.kv.recurrent_state().size(), 0.0f);
  st.recent_first = n_past() + 1;
}

std::span<const float> Session::recent_state(int n) const {
  const State& st = *state_;
  if (st.recent_slots == 0 || n < st.recent_first || n > n_past()) return {};
  const size_t size = st.kv.recurrent_state().size();
  return std::span<const float>(st.recent).subspan((n % st.recent_slots) * size, size);
}

float* const* Session::recent_destinations(int n) {
  State& st = *state_;
  if (st.recent_slots == 0) return nullptr;
  const size_t size = st.kv.recurrent_state().size();
  // An eval from 0 starts from a zero state; the slots of the oldest
  // positions are written over (before the pass: one that fails midway
  // leaves them half written).
  if (n_past() == 0) st.recent_first = 1;
  st.recent_first = std::max(st.recent_first, n_past() + n + 1 - st.recent_slots);
  // Only the last recent_slots tokens of a longer eval are kept.
  st.recent_dest.assign(n, nullptr);
  for (int i = std::max(0, n - st.recent_slots); i < n; ++i)
    st.recent_dest[i] = st.recent.data() + ((n_past() + i + 1) % st.recent_slots) * size;
  return st.recent_dest.data();
}

void Session::keep_hidden_states() {
  if (!state_->hidden.empty()) return;
  state_->hidden.assign(static_cast<size_t>(n_ctx()) * engine_.impl_->model->config().nextn_hidden_width(), 0.0f);
  state_->hidden_known.assign(n_ctx(), false);
}

std::span<const float> Session::hidden_state(int pos) const {
  const size_t width = engine_.impl_->model->config().nextn_hidden_width();
  if (pos < 0 || pos >= n_past() || state_->hidden.empty() || !state_->hidden_known[pos]) return {};
  return std::span<const float>(state_->hidden).subspan(pos * width, width);
}

Result<std::vector<float>> Session::mean_hidden_state(std::span<const int32_t> tokens) {
  Engine::Impl& e = *engine_.impl_;
  std::vector<float> mean(static_cast<size_t>(e.info.n_embd), 0.0f);
  if (Status s = catch_up(); !s.ok()) return s;
  Status s = e.model->forward_hidden(tokens, n_past(), state_->kv, *e.pool, mean);
  if (!s.ok()) return s;
  state_->rows = 0;
  if (!state_->hidden.empty()) std::fill_n(state_->hidden_known.begin() + n_past(), tokens.size(), false);
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  state_->recent_first = n_past() + 1;  // this pass kept no recent states
  for (float& v : mean) v /= static_cast<float>(tokens.size());
  return mean;
}

std::span<const float> Session::logits(int row) const {
  const size_t n_vocab = engine_.impl_->info.n_vocab;
  if (row < 0 || row >= state_->rows) return {};
  return std::span<const float>(state_->logits).subspan(row * n_vocab, n_vocab);
}

int Session::n_logit_rows() const { return state_->rows; }

void Session::truncate(int n) {
  state_->tail_staged = false;
  if (n < 0 || n >= n_past()) return;
  history_.resize(n);
  state_->rows = 0;
  if (!keeps_state()) return;
  // A state kept at n is the one the next eval continues from.
  state_->snapshots.drop_after(n);
  if (CompressorCache* cc = state_->kv.compressor()) {
    // Else from the resume point at or below n; the next eval evaluates
    // the tokens from there to n again (catch_up).
    const std::span<const float> kept = state_->snapshots.at(n);
    if (!kept.empty())
      cc->restore_tail(n, kept);
    else if (!cc->can_continue(n))
      cc->restore_resume_point(cc->resume_point_at_or_below(n));
    return;
  }
  // Rings: resumable_at() said whether their window before n is there.
  if (!engine_.impl_->model->config().is_hybrid()) return;
  // A hybrid's: a recent one (a rejected draft's position) or a snapshot.
  // The recent states above n are gone with their tokens.
  std::span<const float> kept = recent_state(n);
  if (kept.empty()) {
    state_->recent_first = n + 1;
    kept = state_->snapshots.at(n);
  }
  if (kept.empty()) return;
  std::copy(kept.begin(), kept.end(), state_->kv.recurrent_state().begin());
  state_->kv.set_recurrent_pos(n);
}

bool Session::can_rewind() const { return state_->kv.recurrent_state().empty(); }

int Session::rewind_reach() const {
  // A hybrid goes back as far as keep_recent_states keeps its states.
  if (engine_.impl_->model->config().is_hybrid()) return std::max(0, state_->recent_slots - 1);
  return state_->kv.rewind_reach();
}

bool Session::keeps_state() const { return engine_.impl_->info.recurrent_state_bytes > 0; }

int Session::resumable_at(int n) const {
  n = std::clamp(n, 0, n_past());
  if (const CompressorCache* cc = state_->kv.compressor()) {
    if (cc->can_continue(n)) return n;
    return std::max(cc->resume_point_at_or_below(n), state_->snapshots.latest_at_or_below(n));
  }
  if (state_->kv.can_continue_at(n) || !recent_state(n).empty()) return n;
  return state_->snapshots.latest_at_or_below(n);
}

void Session::keep_recurrent_state() {
  if (!keeps_state() || n_past() == 0) return;
  if (!state_->snapshots.at(n_past()).empty()) return;  // kept already (a prompt resumed whole)
  // After a truncate to a position with no kept state, the current state
  // belongs to no position of the history.
  if (const CompressorCache* cc = state_->kv.compressor()) {
    if (!cc->can_continue(n_past())) return;
    state_->tail.resize(cc->tail_floats());
    cc->save_tail(n_past(), state_->tail);
    state_->snapshots.keep(n_past(), state_->tail);
    return;
  }
  // Rings are too big to copy: only a hybrid's state is kept.
  if (!engine_.impl_->model->config().is_hybrid() || state_->kv.recurrent_pos() != n_past()) return;
  state_->snapshots.keep(n_past(), state_->kv.recurrent_state());
}

std::span<const float> Session::recurrent_state_at(int n) const {
  if (!keeps_state() || n <= 0 || n > n_past()) return {};
  if (const CompressorCache* cc = state_->kv.compressor()) {
    const std::span<const float> kept = state_->snapshots.at(n);
    if (!kept.empty() || !cc->can_continue(n)) return kept;
    state_->tail.resize(cc->tail_floats());
    cc->save_tail(n, state_->tail);
    return state_->tail;
  }
  // A ring that holds the window before n is a state of position n: the
  // rows of later positions in it are rewritten before they are read.
  if ((n == n_past() && state_->kv.recurrent_pos() == n) ||
      (!engine_.impl_->model->config().is_hybrid() && state_->kv.can_continue_at(n)))
    return state_->kv.recurrent_state();
  if (const auto recent = recent_state(n); !recent.empty()) return recent;
  return state_->snapshots.at(n);
}

std::span<float> Session::recurrent_state() {
  if (const CompressorCache* cc = state_->kv.compressor()) {
    state_->tail.resize(cc->tail_floats());
    state_->tail_staged = true;
    return state_->tail;
  }
  if (can_rewind()) return {};
  return state_->kv.recurrent_state();
}

Status Session::catch_up() {
  CompressorCache* cc = state_->kv.compressor();
  if (!cc || cc->can_continue(n_past())) return {};
  const int from = cc->stands_at();
  const std::span<const int32_t> again = std::span(history_).subspan(from);
  const Model::SequenceInput replay{again, from, &state_->kv, false, &state_->logits,
                                    state_->hidden.empty() ? nullptr : state_->hidden.data()};
  return engine_.impl_->model->forward({&replay, 1}, *engine_.impl_->pool);
}

size_t Session::kv_bytes_per_token() const { return engine_.impl_->info.kv_bytes_per_token; }

std::vector<KvRun> Session::kv_runs() {
  // The rows a GPU holds are copied into the host's cache first.
  if (!engine_.impl_->model->sync_kv_to_host(state_->kv).ok()) return {};
  const size_t n_ctx = static_cast<size_t>(state_->kv.n_ctx());
  std::vector<KvRun> runs;
  for (int part = 0; part < 2; ++part)
    for (int layer = 0; layer < engine_.impl_->model->config().n_kv_layer(); ++layer) {
      const KvCache::LayerShape& shape = state_->kv.shape(layer);
      if (shape.ring) continue;  // state (recurrent_state), not rows by position
      const size_t width = static_cast<size_t>(part == 0 ? shape.dim_k : shape.dim_v) * sizeof(uint16_t);
      for (int head = 0; head < shape.n_head_kv; ++head) {
        uint16_t* run = part == 0 ? state_->kv.key(layer, head, 0) : state_->kv.value(layer, head, 0);
        runs.push_back({reinterpret_cast<uint8_t*>(run), width, n_ctx});
      }
    }
  if (CompressorCache* cc = state_->kv.compressor()) cc->append_runs(runs);
  return runs;
}

Status Session::adopt_kv(std::span<const int32_t> tokens, size_t read_tokens) {
  const int n = static_cast<int>(tokens.size());
  if (n > n_ctx()) return Status::error("adopt_kv: " + std::to_string(n) + " tokens do not fit the context of " +
                                        std::to_string(n_ctx()));
  const int n_vocab = engine_.impl_->info.n_vocab;
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab)
      return Status::error("adopt_kv: token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                           std::to_string(n_vocab - 1) + ")");
  history_.assign(tokens.begin(), tokens.end());
  state_->rows = 0;
  state_->kv.forget_device_rows(n);
  // The caller read the state after these tokens into recurrent_state().
  state_->kv.set_recurrent_pos(n);
  if (CompressorCache* cc = state_->kv.compressor()) {
    // Without a tail read for these tokens, from the resume point below (catch_up).
    if (state_->tail_staged && n > 0 && (read_tokens == 0 || read_tokens == tokens.size()))
      cc->restore_tail(n, state_->tail);
    else
      cc->restore_resume_point(cc->resume_point_at_or_below(n));
    state_->tail_staged = false;
  }
  state_->snapshots.clear();
  state_->recent_first = n + 1;
  std::fill(state_->hidden_known.begin(), state_->hidden_known.end(), false);
  return {};
}

}  // namespace revis
