#include "kvstore/store.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>
#include <system_error>

#include "kvstore/checksum.h"

namespace revis::kvstore {

namespace fs = std::filesystem;

KvStore::KvStore(StoreOptions options, uint64_t model, KvShape shape)
    : options_(std::move(options)), model_(model), shape_(shape) {
  if (!options_.clock)
    options_.clock = [] {
      return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    };
}

Result<std::unique_ptr<KvStore>> KvStore::open(StoreOptions options, uint64_t model, KvShape shape) {
  if (options.dir.empty()) return Status::error("--kv-dir: empty path (expected a directory)");
  if (!(options.half_life_s > 0)) return Status::error("KV store half-life must be positive");
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return Status::error(options.dir + ": cannot create the KV directory: " + ec.message());
  if (!fs::is_directory(options.dir, ec)) return Status::error(options.dir + ": not a directory");
  std::unique_ptr<KvStore> store(new KvStore(std::move(options), model, shape));
  if (Status s = store->scan(); !s.ok()) return s;
  return store;
}

double KvStore::now() const { return options_.clock(); }

Status KvStore::scan() {
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = d.path().filename().string();
    if (name.empty() || name[0] == '.' || d.path().extension() != kCheckpointSuffix) continue;
    auto summary = read_checkpoint_summary(d.path().string());
    if (!summary.ok()) {
      scan_problems_.push_back(summary.status().message());
      continue;
    }
    StoreEntry e;
    e.file = name;
    e.header = summary->header;
    e.tokens = std::move(summary->tokens);
    e.bytes = summary->file_bytes;
    struct stat st {};
    if (::stat(d.path().c_str(), &st) == 0) e.last_used = st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
    add(std::move(e));
  }
  if (ec) return Status::error(options_.dir + ": cannot list the KV directory: " + ec.message());
  return {};
}

void KvStore::add(StoreEntry entry) {
  if (auto old = by_file_.find(entry.file); old != by_file_.end()) drop(old->second, false);
  const uint64_t id = next_id_++;
  if (model_ != 0 && entry.header.model == model_ && entry.header.shape == shape_) index_.insert(entry.tokens, id);
  total_bytes_ += entry.bytes;
  by_file_[entry.file] = id;
  entries_.emplace(id, std::move(entry));
}

void KvStore::drop(uint64_t id, bool delete_file) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  const StoreEntry& e = it->second;
  if (model_ != 0 && e.header.model == model_) {
    // Only if the index maps these tokens to this entry (a rewrite may have replaced it).
    auto m = index_.longest_common(e.tokens);
    if (m && m->id == id && m->key_length == static_cast<int>(e.tokens.size())) index_.erase(e.tokens);
  }
  if (delete_file) {
    std::error_code ec;
    fs::remove(fs::path(options_.dir) / e.file, ec);
  }
  total_bytes_ -= std::min(total_bytes_, e.bytes);
  by_file_.erase(e.file);
  entries_.erase(it);
}

const StoreEntry* KvStore::find(uint64_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

uint64_t KvStore::id_of(const StoreEntry& entry) const {
  auto it = by_file_.find(entry.file);
  return it == by_file_.end() ? 0 : it->second;
}

std::optional<KvStore::Match> KvStore::longest_common(std::span<const int32_t> tokens) const {
  auto m = index_.longest_common(tokens);
  if (!m) return std::nullopt;
  return Match{find(m->id), m->common};
}

std::optional<KvStore::Match> KvStore::longest_prefix_of(std::span<const int32_t> tokens) const {
  const std::vector<uint64_t> ids = index_.prefixes_of(tokens);  // shortest first
  if (ids.empty()) return std::nullopt;
  const StoreEntry* entry = find(ids.back());
  if (!entry) return std::nullopt;
  return Match{entry, static_cast<int>(entry->tokens.size())};
}

bool KvStore::contains(std::span<const int32_t> tokens) const {
  auto m = index_.longest_common(tokens);
  return m && m->common == static_cast<int>(tokens.size()) && m->key_length == m->common;
}

Result<CheckpointContents> KvStore::load(const StoreEntry& entry, std::span<const KvRun> runs, std::span<float> state,
                                        ReadTimings* timings) {
  const uint64_t id = id_of(entry);
  const std::string path = (fs::path(options_.dir) / entry.file).string();
  auto contents = read_checkpoint_into(path, model_, shape_, runs, state, timings);
  if (!contents.ok()) {
    std::error_code ec;
    drop(id, fs::exists(path, ec));  // a damaged file goes; a vanished one is just forgotten
    return contents.status();
  }
  return contents;
}

void KvStore::record_hit(const StoreEntry& entry, int used) {
  const double t = now();
  std::vector<uint64_t> ids = index_.prefixes_of(std::span(entry.tokens).first(std::min<size_t>(used, entry.tokens.size())));
  const uint64_t self = id_of(entry);
  if (std::find(ids.begin(), ids.end(), self) == ids.end()) ids.push_back(self);
  for (uint64_t id : ids) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    StoreEntry& e = it->second;
    e.hits = e.hits * std::exp2(-(t - e.last_used) / options_.half_life_s) + 1;
    e.last_used = t;
    // The mtime carries recency over a restart.
    const struct timespec times[2] = {{static_cast<time_t>(t), static_cast<long>((t - std::floor(t)) * 1e9)},
                                      {static_cast<time_t>(t), static_cast<long>((t - std::floor(t)) * 1e9)}};
    ::utimensat(AT_FDCWD, (fs::path(options_.dir) / e.file).c_str(), times, 0);
  }
}

double KvStore::value(const StoreEntry& entry) const {
  const double age = std::max(0.0, now() - entry.last_used);
  return static_cast<double>(entry.tokens.size()) * entry.hits * std::exp2(-age / options_.half_life_s);
}

Result<std::string> KvStore::prepare(CheckpointHeader& header, std::span<const int32_t> tokens) const {
  if (model_ == 0) return Status::error("KV store opened without a model: cannot save");
  header.model = model_;
  header.shape = shape_;
  return (fs::path(options_.dir) / checkpoint_file_name(model_, tokens)).string();
}

void KvStore::install(const CheckpointHeader& header, std::vector<int32_t> tokens) {
  StoreEntry e;
  e.file = checkpoint_file_name(model_, tokens);
  e.header = header;
  e.tokens = std::move(tokens);
  e.bytes = header.payload_bytes + kCheckpointHeaderBytes;
  std::error_code ec;
  if (const uintmax_t size = fs::file_size(fs::path(options_.dir) / e.file, ec); !ec) e.bytes = size;
  e.last_used = now();
  const std::string name = e.file;
  add(std::move(e));
  if (options_.budget_bytes > 0) evict_to(options_.budget_bytes, find(by_file_.at(name)));
}

Status KvStore::save(CheckpointHeader& header, const CheckpointContents& contents, std::span<const KvRun> runs,
                     std::span<const float> state) {
  auto path = prepare(header, contents.tokens);
  if (!path.ok()) return path.status();
  if (Status s = write_checkpoint(*path, header, contents, runs, state); !s.ok()) return s;
  install(header, contents.tokens);
  return {};
}

std::vector<std::string> KvStore::evict_to(uint64_t budget_bytes, const StoreEntry* keep) {
  std::vector<std::string> removed;
  while (total_bytes_ > budget_bytes) {
    const StoreEntry* victim = nullptr;
    double lowest = 0;
    for (const auto& [id, e] : entries_) {
      if (&e == keep) continue;
      const double v = value(e);
      if (!victim || v < lowest) {
        victim = &e;
        lowest = v;
      }
    }
    if (!victim) break;
    removed.push_back(victim->file);
    drop(id_of(*victim), true);
  }
  return removed;
}

bool KvStore::remove(const std::string& file) {
  auto it = by_file_.find(file);
  if (it == by_file_.end()) return false;
  drop(it->second, true);
  return true;
}

std::vector<const StoreEntry*> KvStore::entries() const {
  std::vector<const StoreEntry*> out;
  for (const auto& [id, e] : entries_) out.push_back(&e);
  return out;
}

std::string KvStore::prefix_digest(uint64_t model, std::span<const int32_t> tokens) {
  return hex64(checksum64(tokens.data(), tokens.size() * sizeof(int32_t), model));
}

std::vector<std::string> KvStore::aligned_prefix_digests(uint64_t model, std::span<const int32_t> tokens, int block) {
  std::vector<std::string> out;
  for (size_t n = block; block > 0 && n <= tokens.size(); n += block) out.push_back(prefix_digest(model, tokens.first(n)));
  return out;
}

std::vector<std::string> KvStore::prefix_digests(int block, size_t limit, int resume_interval) const {
  if (block <= 0 || model_ == 0) return {};
  std::vector<std::pair<size_t, std::string>> found;
  std::set<std::string> seen;
  for (const auto& [id, e] : entries_) {
    if (e.header.model != model_) continue;
    for (size_t n = block; n <= e.tokens.size(); n += block) {
      // The longest aligned prefix stands for the whole checkpoint (a
      // prompt that parts from it in its last tokens after that point is
      // counted as cached, though it is served only at a resume point);
      // shorter ones only where a shorter prefix resumes.
      const bool longest = n + block > e.tokens.size();
      if (!longest && (resume_interval <= 0 || n % resume_interval != 0)) continue;
      std::string d = prefix_digest(model_, std::span(e.tokens).first(n));
      if (seen.insert(d).second) found.emplace_back(n, std::move(d));
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < found.size() && i < limit; ++i) out.push_back(found[i].second);
  return out;
}

}  // namespace revis::kvstore
