#include "bench/inference.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <random>

namespace revis::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

int32_t greedy_token(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// n_generate steps, the first feeding first_token (chosen before the clock
// starts); end-of-generation tokens are fed back like any other, so the
// count is always exact.
Result<double> time_generation(Session& session, int32_t first_token, int n_generate) {
  int32_t token = first_token;
  const auto start = Clock::now();
  for (int step = 0; step < n_generate; ++step) {
    if (Status s = session.eval({&token, 1}); !s.ok()) return s;
    token = greedy_token(session.logits());
  }
  return ms_between(start, Clock::now());
}

}  // namespace

std::vector<int32_t> random_prompt(const Engine& engine, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, engine.info().n_vocab - 1);
  std::vector<int32_t> tokens;
  tokens.reserve(n);
  // A vocabulary made almost entirely of end-of-generation tokens (only a
  // broken file has one) would make the rejection loop endless: after many
  // misses, take whatever comes, since speed does not depend on the ids.
  const int64_t patience = 64 * static_cast<int64_t>(n) + 1024;
  for (int64_t draws = 0; static_cast<int>(tokens.size()) < n; ++draws) {
    const int32_t id = pick(rng);
    if (draws >= patience || !engine.is_end_of_generation(id)) tokens.push_back(id);
  }
  return tokens;
}

Result<RunTiming> time_run(Engine& engine, std::span<const int32_t> prompt, int n_generate) {
  std::unique_ptr<Session> session = engine.new_session();
  RunTiming t;
  t.n_prompt = static_cast<int>(prompt.size());
  t.n_generated = n_generate;
  const auto start = Clock::now();
  if (Status s = session->eval(prompt); !s.ok()) return s;
  const auto prefilled = Clock::now();
  const int32_t first = greedy_token(session->logits());
  const auto first_chosen = Clock::now();
  t.prefill_ms = ms_between(start, prefilled);
  t.ttft_ms = ms_between(start, first_chosen);
  auto generate_ms = time_generation(*session, first, n_generate);
  if (!generate_ms.ok()) return generate_ms.status();
  t.generate_ms = *generate_ms;
  return t;
}

Result<std::vector<FrontierTiming>> time_frontiers(Engine& engine, std::span<const int32_t> prompt,
                                                   std::span<const int> depths, int n_generate) {
  std::unique_ptr<Session> session = engine.new_session();
  std::vector<FrontierTiming> points;
  double filled_ms = 0;
  int filled = 0;
  for (int depth : depths) {
    if (depth <= filled || depth > static_cast<int>(prompt.size()))
      return Status::error("frontier depths must ascend and fit the prompt (depth " + std::to_string(depth) + ")");
    const auto start = Clock::now();
    if (Status s = session->eval(prompt.subspan(filled, depth - filled)); !s.ok()) return s;
    filled_ms += ms_between(start, Clock::now());
    filled = depth;
    FrontierTiming point;
    point.depth = depth;
    point.prefill_ms = filled_ms;
    point.n_generated = n_generate;
    auto generate_ms = time_generation(*session, greedy_token(session->logits()), n_generate);
    if (!generate_ms.ok()) return generate_ms.status();
    point.generate_ms = *generate_ms;
    session->truncate(depth);
    points.push_back(point);
  }
  return points;
}

uint64_t peak_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
#ifdef __APPLE__
  return static_cast<uint64_t>(usage.ru_maxrss);  // macOS reports bytes
#else
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
#endif
}

double process_cpu_seconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace revis::bench
