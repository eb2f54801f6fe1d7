// revis kv ls|rm|gc --kv-dir DIR: inspect and manage a directory of KV
// checkpoints (docs/kvstore.md). No model is loaded: the files' headers say
// which model wrote them. revis kv bench -m MODEL: time to first token of a
// long prompt, cold vs resumed from disk vs resumed from RAM.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
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
  if (args.files.empty() && !args.all) return fail("kv rm: name the files to remove, or --all");
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

// Removes damaged files and leftovers of interrupted writes, then evicts by
// value down to the budget.
int collect_garbage(const KvArgs& args) {
  if (args.budget_given && !(args.budget_mib >= 0)) return fail("--kv-budget: expected MiB >= 0");
  auto store = open_store(args);
  if (!store.ok()) return fail(store.status().message());
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(args.dir, ec)) {
    const std::string name = d.path().filename().string();
    const bool leftover = unfinished_write(name);
    bool damaged = false;
    for (const std::string& problem : (*store)->scan_problems()) damaged |= problem.rfind(d.path().string(), 0) == 0;
    if (leftover || damaged) {
      fs::remove(d.path(), ec);
      std::printf("removed %s (%s)\n", name.c_str(), leftover ? "unfinished write" : "damaged");
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
};

// Asks the kernel to forget the cached pages of every checkpoint, so that a
// resume reads from the device rather than from RAM. The files were fsynced
// when written, so their pages are clean and can be dropped.
void drop_page_cache(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(dir, ec)) {
    const int fd = ::open(d.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

struct Timed {
  double ttft_ms = 0;
  std::string source;
  int cached = 0;
  std::vector<float> next_logits;
};

// One request through the cache: acquire, generate the first token, release.
Result<Timed> first_token(Engine& engine, kvstore::PrefixCache& cache, const std::vector<int32_t>& prompt) {
  GenerateOptions options;
  options.max_tokens = 1;
  options.sampling.temperature = 0;
  options.ignore_eog = true;
  auto lease = cache.acquire(prompt, false);
  if (!lease.ok()) return lease.status();
  Timed t;
  t.source = lease->source;
  auto r = generate(engine, *lease->session, prompt, options, nullptr, lease->cached);
  if (!r.ok()) return r.status();
  t.ttft_ms = r->ttft_ms;
  t.cached = r->cached_tokens;
  t.next_logits = r->next_logits;
  cache.release(std::move(*lease), prompt, r->next_logits, false);
  return t;
}

int run_kv_bench(const KvBenchArgs& args) {
  if (args.n_prompt < 2 * kResumeAlignment)
    return fail("-p: " + std::to_string(args.n_prompt) + " (expected >= " + std::to_string(2 * kResumeAlignment) + ")");
  if (args.repetitions < 1) return fail("-r: " + std::to_string(args.repetitions) + " (expected >= 1)");
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
        *engine, {.ram_sessions = 1, .kv_dir = dir, .save_min_tokens = kResumeAlignment, .warn = warn});
  };
  int exit_code = 0;
  [&] {
    // Cold: a store without this prompt; the request leaves a checkpoint behind.
    auto cache = open_cache();
    if (!cache.ok()) return void(exit_code = fail(cache.status().message()));
    if ((*cache)->store()->contains(prompt))
      (*cache)->store()->remove(kvstore::checkpoint_file_name(engine->info().fingerprint, prompt));
    std::fprintf(stderr, "cold prefill of %d tokens ...\n", args.n_prompt);
    auto cold = first_token(*engine, **cache, prompt);
    if (!cold.ok()) return void(exit_code = fail(cold.status().message()));
    const double save_ms = (*cache)->last_save_ms();
    const auto* entry = (*cache)->store()->longest_common(prompt)->entry;
    const uint64_t file_bytes = entry->bytes;
    std::fprintf(stderr, "cold TTFT %.0f ms; checkpoint saved in %.0f ms (%.1f MiB)\n", cold->ttft_ms, save_ms,
                 file_bytes / 1048576.0);

    std::vector<double> disk_ms, ram_ms;
    bool identical = true;
    for (int rep = 0; rep < args.repetitions; ++rep) {
      // A new cache (nothing in RAM) and no page cache: the rows come from the device.
      drop_page_cache(dir);
      auto fresh = open_cache();
      if (!fresh.ok()) return void(exit_code = fail(fresh.status().message()));
      auto disk = first_token(*engine, **fresh, prompt);
      if (!disk.ok()) return void(exit_code = fail(disk.status().message()));
      if (disk->source != "disk") return void(exit_code = fail("expected a resume from disk, got " + disk->source));
      auto ram = first_token(*engine, **fresh, prompt);
      if (!ram.ok()) return void(exit_code = fail(ram.status().message()));
      if (ram->source != "ram") return void(exit_code = fail("expected a resume from RAM, got " + ram->source));
      identical = identical && disk->next_logits == cold->next_logits && ram->next_logits == cold->next_logits;
      std::fprintf(stderr, "run %d/%d: disk %.1f ms, RAM %.2f ms\n", rep + 1, args.repetitions, disk->ttft_ms,
                   ram->ttft_ms);
      disk_ms.push_back(disk->ttft_ms);
      ram_ms.push_back(ram->ttft_ms);
    }
    const double disk = bench::summarize(disk_ms).median, ram = bench::summarize(ram_ms).median;
    std::printf("prompt          %d tokens, %s\n", args.n_prompt, engine->info().path.c_str());
    std::printf("cold TTFT       %10.1f ms\n", cold->ttft_ms);
    std::printf("disk TTFT       %10.1f ms   (median of %d, page cache dropped)   %.0fx faster than cold\n", disk,
                args.repetitions, cold->ttft_ms / disk);
    std::printf("RAM TTFT        %10.2f ms   (median of %d)   %.0fx faster than cold\n", ram, args.repetitions,
                cold->ttft_ms / ram);
    std::printf("checkpoint      %10.1f MiB  (%.0f bytes per token, F16 rows), saved in %.0f ms\n",
                file_bytes / 1048576.0, static_cast<double>(file_bytes) / args.n_prompt, save_ms);
    std::printf("logits          %s\n", identical ? "bit-identical to the cold prefill" : "DIFFER from the cold prefill");
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

  auto* gc = cmd->add_subcommand("gc", "Remove damaged files and unfinished writes; evict down to --kv-budget");
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
  bench->callback([bench_args, &exit_code] { exit_code = run_kv_bench(*bench_args); });
}

}  // namespace revis::cli
