// revis kv ls|rm|gc --kv-dir DIR: inspect and manage a directory of KV
// checkpoints (docs/kvstore.md). No model is loaded: the files' headers say
// which model wrote them. revis kv bench -m MODEL: time to first token of a
// long prompt, cold vs resumed from disk vs resumed from RAM.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/inference.h"
#include "bench/stats.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress_line.h"
#include "kvstore/checksum.h"
#include "kvstore/prefix_cache.h"
#include "kvstore/store.h"
#include "revis/generate.h"

namespace revis::cli {
namespace {

namespace fs = std::filesystem;

struct KvArgs {
  std::string dir;
  bool json = false;
  std::vector<std::string> files;
  bool all = false;
  double budget_mib = 0;
  bool budget_given = false;
};

Result<std::unique_ptr<kvstore::KvStore>> open_store(const KvArgs& args) {
  std::error_code ec;
  if (!fs::is_directory(args.dir, ec)) return Status::error(args.dir + ": not a directory (--kv-dir)");
  return kvstore::KvStore::open({.dir = args.dir}, 0, {});
}

int list(const KvArgs& args) {
  auto store = open_store(args);
  if (!store.ok()) return fail(store.status().message());
  nlohmann::json files = nlohmann::json::array();
  if (!args.json) std::printf("%-62s %-16s %8s %10s %9s %10s  %s\n", "file", "model", "tokens", "MiB", "B/token",
                              "value", "last used");
  for (const kvstore::StoreEntry* e : (*store)->entries()) {
    const double bytes_per_token = static_cast<double>(e->bytes) / e->tokens.size();
    const time_t last = static_cast<time_t>(e->last_used);
    char when[32] = "?";
    if (struct tm tm {}; localtime_r(&last, &tm)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    if (args.json) {
      files.push_back({{"file", e->file},
                       {"model", kvstore::hex64(e->header.model)},
                       {"tokens", e->tokens.size()},
                       {"bytes", e->bytes},
                       {"bytes_per_token", bytes_per_token},
                       {"has_logits", e->header.has_logits},
                       {"value", (*store)->value(*e)},
                       {"last_used", e->last_used},
                       {"writer", e->header.writer}});
    } else {
      std::printf("%-62s %-16s %8zu %10.1f %9.0f %10.0f  %s\n", e->file.c_str(), kvstore::hex64(e->header.model).c_str(),
                  e->tokens.size(), e->bytes / 1048576.0, bytes_per_token, (*store)->value(*e), when);
    }
  }
  for (const std::string& problem : (*store)->scan_problems()) std::fprintf(stderr, "damaged: %s\n", problem.c_str());
  if (args.json) {
    nlohmann::json damaged = (*store)->scan_problems();
    std::printf("%s\n", nlohmann::json{{"dir", args.dir}, {"total_bytes", (*store)->total_bytes()},
                                       {"files", files}, {"damaged", damaged}}
                            .dump()
                            .c_str());
  } else {
    std::printf("%zu checkpoints, %.1f MiB\n", (*store)->entries().size(), (*store)->total_bytes() / 1048576.0);
  }
  return 0;
}

int remove_files(const KvArgs& args) {
  if (args.files.empty() && !args.all) return usage_error("kv rm: name the files to remove, or --all");
  auto store = open_store(args);
  if (!store.ok()) return fail(store.status().message());
  std::vector<std::string> names = args.files;
  if (args.all)
    for (const kvstore::StoreEntry* e : (*store)->entries()) names.push_back(e->file);
  int missing = 0;
  for (const std::string& name : names) {
    if ((*store)->remove(fs::path(name).filename().string())) {
      std::printf("removed %s\n", name.c_str());
    } else {
      std::fprintf(stderr, "error: %s: no such checkpoint in %s\n", name.c_str(), args.dir.c_str());
      ++missing;
    }
  }
  return missing ? 1 : 0;
}

// A temporary file (".NAME.PID.N.part") whose writer process is gone: what
// an interrupted write leaves. One whose writer still runs is being written.
bool unfinished_write(const std::string& name) {
  if (name.size() < 6 || name[0] != '.' || !name.ends_with(".part")) return false;
  const std::string stem = name.substr(0, name.size() - 5);  // ".NAME.PID.N"
  const size_t counter_dot = stem.rfind('.');
  const size_t pid_dot = counter_dot == std::string::npos || counter_dot == 0 ? std::string::npos
                                                                              : stem.rfind('.', counter_dot - 1);
  if (pid_dot == std::string::npos) return true;
  const std::string pid_text = stem.substr(pid_dot + 1, counter_dot - pid_dot - 1);
  char* end = nullptr;
  const long pid = std::strtol(pid_text.c_str(), &end, 10);
  if (pid_text.empty() || *end != '\0' || pid <= 0) return true;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Removes damaged files, files of an older format and leftovers of
// interrupted writes, then evicts by value down to the budget.
int collect_garbage(const KvArgs& args) {
  if (args.budget_given && !(args.budget_mib >= 0)) return usage_error("--kv-budget: expected MiB >= 0");
  auto store = open_store(args);
  if (!store.ok()) return fail(store.status().message());
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(args.dir, ec)) {
    const std::string name = d.path().filename().string();
    const bool leftover = unfinished_write(name);
    // Unreadable: damaged, or written in an older format (the scan's
    // message, after the path, says which).
    std::string why = leftover ? "unfinished write" : "";
    const std::string prefix = d.path().string() + ": ";
    for (const std::string& problem : (*store)->scan_problems())
      if (problem.starts_with(prefix)) why = problem.substr(prefix.size());
    if (!why.empty()) {
      fs::remove(d.path(), ec);
      std::printf("removed %s (%s)\n", name.c_str(), why.c_str());
      ++removed;
    }
  }
  if (args.budget_given)
    for (const std::string& name : (*store)->evict_to(static_cast<uint64_t>(args.budget_mib * 1048576.0))) {
      std::printf("evicted %s\n", name.c_str());
      ++removed;
    }
  std::printf("%d files removed; %zu checkpoints, %.1f MiB kept\n", removed, (*store)->entries().size(),
              (*store)->total_bytes() / 1048576.0);
  return 0;
}

struct KvBenchArgs {
  std::string model, dir;
  int n_prompt = 4096, repetitions = 3, threads = 0;
  uint64_t seed = 1;
  bool synthetic = false;
};

// Asks the kernel to forget the cached pages of a file, so that the next
// read of it comes from the device rather than from RAM. Checkpoints are
// fsynced when written, so their pages are clean and can be dropped.
void drop_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// The roofline of a resume: milliseconds to read the whole file with large
// sequential reads, its pages dropped from the cache first (what `dd
// bs=8M` would measure).
Result<double> sequential_read_ms(const std::string& path) {
  drop_page_cache(path);
  const auto start = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(path + ": " + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<uint8_t> buffer(size_t{8} << 20);
  ssize_t got = 0;
  while ((got = ::read(fd, buffer.data(), buffer.size())) > 0 || (got < 0 && errno == EINTR)) {
  }
  const int err = errno;
  ::close(fd);
  if (got < 0) return Status::error(path + ": " + std::strerror(err));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Timed {
  double ttft_ms = 0, restore_ms = 0, save_ms = 0;
  kvstore::ReadTimings read;  // of a resume from disk
  std::string source;
  int cached = 0;
  std::vector<float> next_logits;
};

// One request through the cache: acquire, generate the first token, release.
// `progress`: shows the prefill of a long prompt (the cold one).
Result<Timed> first_token(Engine& engine, kvstore::PrefixCache& cache, const std::vector<int32_t>& prompt,
                          ProgressLine* progress = nullptr) {
  GenerateOptions options;
  options.max_tokens = 1;
  options.sampling.temperature = 0;
  options.ignore_eog = true;
  auto lease = cache.acquire(prompt);
  if (!lease.ok()) return lease.status();
  if (progress)
    show_prefill_progress(options, *progress, static_cast<int>(prompt.size()), lease->cached.cached_tokens);
  Timed t;
  t.source = lease->source;
  t.restore_ms = lease->cached.restore_ms;
  if (t.source == "disk") t.read = cache.last_restore();
  auto r = generate(engine, *lease->session, prompt, options, nullptr, lease->cached);
  if (!r.ok()) return r.status();
  t.ttft_ms = r->ttft_ms;
  t.cached = r->cached_tokens;
  t.next_logits = r->next_logits;
  cache.release(std::move(*lease), prompt, r->next_logits);
  return t;
}

// --synthetic: a checkpoint of random rows and logits for `prompt`, written
// from a session's cache as a request would leave it, without the prefill
// (minutes to hours for long prompts on small machines). The resumes read,
// verify and adopt it like any other; their first token comes from its
// logits, so the rows themselves are never evaluated.
Result<Timed> synthetic_checkpoint(Engine& engine, kvstore::KvStore& store, const std::vector<int32_t>& prompt,
                                   uint64_t seed) {
  std::unique_ptr<Session> session = engine.new_session();
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  const std::vector<KvRun> runs = session->kv_runs();
  for (const KvRun& r : runs) {
    uint16_t* halves = reinterpret_cast<uint16_t*>(r.data);
    // Finite float16 values in [-2, 2): sign, exponents 0..15, any mantissa.
    for (size_t i = 0; i < prompt.size() * r.bytes_per_position / 2; ++i)
      halves[i] = static_cast<uint16_t>(next() & 0xbfff);
  }
  // A hybrid's recurrent state, as random as the rows.
  const std::span<float> state = session->recurrent_state();
  for (float& f : state) f = static_cast<float>(next() % 20000) / 10000.0f - 1.0f;
  Timed t;
  t.next_logits.resize(engine.info().n_vocab);
  for (float& f : t.next_logits) f = static_cast<float>(next() % 20000) / 1000.0f - 10.0f;
  kvstore::CheckpointHeader header;
  header.writer = "revis kv bench --synthetic";
  const auto start = std::chrono::steady_clock::now();
  if (Status s = store.save(header, {.tokens = prompt, .logits = t.next_logits}, runs, state); !s.ok()) return s;
  t.save_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return t;
}

int run_kv_bench(const KvBenchArgs& args) {
  if (args.n_prompt < 1) return usage_error("-p: " + std::to_string(args.n_prompt) + " (expected >= 1)");
  if (args.repetitions < 1) return usage_error("-r: " + std::to_string(args.repetitions) + " (expected >= 1)");
  std::string dir = args.dir;
  std::string scratch;
  if (dir.empty()) {
    std::string pattern = (fs::temp_directory_path() / "revis-kv-bench-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) return fail("cannot create a temporary directory for the checkpoints");
    dir = scratch = pattern;
  }
  auto engine = load_engine({.model_path = args.model, .n_ctx = args.n_prompt + 1, .n_threads = args.threads});
  if (!engine) return 1;
  const std::vector<int32_t> prompt = bench::random_prompt(*engine, args.n_prompt, args.seed);
  auto warn = [](const std::string& m) { std::fprintf(stderr, "warning: %s\n", m.c_str()); };
  auto open_cache = [&]() {
    return kvstore::PrefixCache::open(
        *engine, {.ram_sessions = 1, .kv_dir = dir, .save_min_tokens = 1, .warn = warn});
  };
  int exit_code = 0;
  [&] {
    // Cold: a store without this prompt; the request leaves a checkpoint behind.
    auto cache = open_cache();
    if (!cache.ok()) return void(exit_code = fail(cache.status().message()));
    if ((*cache)->store()->contains(prompt)) (*cache)->store()->remove(kvstore::checkpoint_file_name(engine->info().fingerprint, prompt));
    Result<Timed> cold = Timed{};
    if (args.synthetic) {
      std::fprintf(stderr, "writing a checkpoint of %d tokens of random rows ...\n", args.n_prompt);
      cold = synthetic_checkpoint(*engine, *(*cache)->store(), prompt, args.seed);
    } else {
      std::fprintf(stderr, "cold prefill of %d tokens ...\n", args.n_prompt);
      ProgressLine progress("cold prefill");
      cold = first_token(*engine, **cache, prompt, &progress);
    }
    if (!cold.ok()) return void(exit_code = fail(cold.status().message()));
    (*cache)->wait_for_save();  // the cold request's checkpoint is written in the background
    const double save_ms = args.synthetic ? cold->save_ms : (*cache)->last_save_ms();
    if (!(*cache)->store()->contains(prompt))
      return void(exit_code = fail("no checkpoint of the prompt was written in " + dir));
    const auto* entry = (*cache)->store()->longest_common(prompt)->entry;
    const uint64_t file_bytes = entry->bytes;
    const std::string file = (fs::path(dir) / entry->file).string();
    if (!args.synthetic) std::fprintf(stderr, "cold TTFT %.0f ms; ", cold->ttft_ms);
    std::fprintf(stderr, "checkpoint saved in %.0f ms (%.1f MiB)\n", save_ms, file_bytes / 1048576.0);

    std::vector<double> disk_ms, ram_ms, file_ms, restore_ms, open_ms, read_ms, verify_ms;
    bool identical = true;
    for (int rep = 0; rep < args.repetitions; ++rep) {
      // The roofline: the same file read sequentially, page cache dropped.
      auto sequential = sequential_read_ms(file);
      if (!sequential.ok()) return void(exit_code = fail(sequential.status().message()));
      // A new cache (nothing in RAM) and no page cache: the rows come from the device.
      drop_page_cache(file);
      auto fresh = open_cache();
      if (!fresh.ok()) return void(exit_code = fail(fresh.status().message()));
      auto disk = first_token(*engine, **fresh, prompt);
      if (!disk.ok()) return void(exit_code = fail(disk.status().message()));
      if (disk->source != "disk") return void(exit_code = fail("expected a resume from disk, got " + disk->source));
      auto ram = first_token(*engine, **fresh, prompt);
      if (!ram.ok()) return void(exit_code = fail(ram.status().message()));
      if (ram->source != "ram") return void(exit_code = fail("expected a resume from RAM, got " + ram->source));
      identical = identical && disk->next_logits == cold->next_logits && ram->next_logits == cold->next_logits;
      std::fprintf(stderr, "run %d/%d: file read %.1f ms, disk %.1f ms (restore %.1f: read %.1f, verify %.1f), "
                   "RAM %.2f ms\n", rep + 1, args.repetitions, *sequential, disk->ttft_ms, disk->restore_ms,
                   disk->read.read_ms, disk->read.verify_ms, ram->ttft_ms);
      disk_ms.push_back(disk->ttft_ms);
      ram_ms.push_back(ram->ttft_ms);
      file_ms.push_back(*sequential);
      restore_ms.push_back(disk->restore_ms);
      open_ms.push_back(disk->read.open_ms);
      read_ms.push_back(disk->read.read_ms);
      verify_ms.push_back(disk->read.verify_ms);
    }
    auto median = [](const std::vector<double>& v) { return bench::summarize(v).median; };
    const double disk = median(disk_ms), ram = median(ram_ms), file_read = median(file_ms);
    const double gbps = file_bytes / (file_read * 1e6);
    std::printf("prompt          %d tokens, %s\n", args.n_prompt, engine->info().path.c_str());
    if (args.synthetic)
      std::printf("cold TTFT       %10s      (not measured: --synthetic rows)\n", "-");
    else
      std::printf("cold TTFT       %10.1f ms\n", cold->ttft_ms);
    std::printf("file read       %10.1f ms   (median of %d, page cache dropped, sequential: %.2f GB/s)\n", file_read,
                args.repetitions, gbps);
    const std::string vs_cold = args.synthetic ? "" : std::to_string(std::llround(cold->ttft_ms / disk)) + "x faster than cold, ";
    std::printf("disk TTFT       %10.1f ms   (median of %d, page cache dropped)   %s%.0f%% of the file's read bandwidth\n",
                disk, args.repetitions, vs_cold.c_str(), 100.0 * file_read / disk);
    std::printf("  restore       %10.1f ms   (open %.1f, read %.1f with verify %.1f overlapped; first token %.1f)\n",
                median(restore_ms), median(open_ms), median(read_ms), median(verify_ms), disk - median(restore_ms));
    const std::string ram_vs_cold = args.synthetic ? "" : "   " + std::to_string(std::llround(cold->ttft_ms / ram)) + "x faster than cold";
    std::printf("RAM TTFT        %10.2f ms   (median of %d)%s\n", ram, args.repetitions, ram_vs_cold.c_str());
    std::printf("checkpoint      %10.1f MiB  (%.0f bytes per token, F16 rows), saved in %.0f ms\n",
                file_bytes / 1048576.0, static_cast<double>(file_bytes) / args.n_prompt, save_ms);
    std::printf("logits          %s %s\n", identical ? "bit-identical to" : "DIFFER from",
                args.synthetic ? "the checkpoint's" : "the cold prefill's");
    if (!identical) exit_code = 1;
  }();
  if (!scratch.empty()) {
    std::error_code ec;
    fs::remove_all(scratch, ec);
  }
  return exit_code;
}

}  // namespace

void register_kv(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("kv", "Inspect and manage a directory of KV checkpoints");
  cmd->require_subcommand(1);
  auto args = std::make_shared<KvArgs>();
  auto add_dir = [&](CLI::App* sub) { sub->add_option("--kv-dir", args->dir, "Checkpoint directory")->required(); };

  auto* ls = cmd->add_subcommand("ls", "List checkpoints: model, tokens, size, value for eviction");
  add_dir(ls);
  ls->add_flag("--json", args->json, "One JSON object");
  ls->callback([args, &exit_code] { exit_code = list(*args); });

  auto* rm = cmd->add_subcommand("rm", "Remove checkpoints by file name");
  add_dir(rm);
  rm->add_option("files", args->files, "Checkpoint file names (as kv ls prints them)");
  rm->add_flag("--all", args->all, "Remove every checkpoint");
  rm->callback([args, &exit_code] { exit_code = remove_files(*args); });

  auto* gc = cmd->add_subcommand("gc", "Remove damaged, old-format and unfinished files; evict down to --kv-budget");
  add_dir(gc);
  gc->add_option("--kv-budget", args->budget_mib, "MiB to keep, evicting the least valuable checkpoints first")
      ->each([args](const std::string&) { args->budget_given = true; });
  gc->callback([args, &exit_code] { exit_code = collect_garbage(*args); });

  auto bench_args = std::make_shared<KvBenchArgs>();
  auto* bench = cmd->add_subcommand("bench", "Time to first token of a long prompt: cold, resumed from disk, from RAM");
  bench->add_option("-m,--model", bench_args->model, "GGUF model file")->required();
  bench->add_option("-p,--n-prompt", bench_args->n_prompt, "Prompt tokens")->capture_default_str();
  bench->add_option("-r,--repetitions", bench_args->repetitions, "Resumes timed (medians are reported)")
      ->capture_default_str();
  bench->add_option("-t,--threads", bench_args->threads, "Threads (default: physical cores)");
  bench->add_option("--seed", bench_args->seed, "Seed for the random prompt tokens")->capture_default_str();
  bench->add_option("--kv-dir", bench_args->dir, "Where to write the checkpoint (default: a temporary directory)");
  bench->add_flag("--synthetic", bench_args->synthetic,
                  "Skip the cold prefill: checkpoint random rows and logits (times the resumes only)");
  bench->callback([bench_args, &exit_code] { exit_code = run_kv_bench(*bench_args); });
}

}  // namespace revis::cli
