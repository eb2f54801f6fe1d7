// The node's counters and their Prometheus text exposition (GET /metrics).
//
// Counters only ever grow (Prometheus computes rates from them); gauges that
// describe the present (queue length, busy, models loaded) are read from the
// executor when the page is rendered and passed in.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/mutex.h"
#include "protocol/job.h"

namespace revis::node {

struct LiveGauges {
  int queue_length = 0;
  int queue_limit = 0;
  bool busy = false;
  int slots = 1, slots_busy = 0;
  int models_loaded = 0;
  uint64_t resident_bytes = 0;
  int gpu_layers = 0;           // of the loaded models, layers a GPU runs
  uint64_t gpu_bytes = 0;       // GPU memory their layers take
  uint64_t model_loads = 0;
  double uptime_s = 0;
};

class Metrics {
 public:
  // Time-to-first-token histogram bucket bounds, in seconds.
  static constexpr std::array<double, 12> kTtftBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                          1,    2.5,   5,    10,  30,   60};

  // outcome: "done" or an error code name. stats only for "done".
  void job_finished(std::string_view source, std::string_view outcome, const JobStats* stats);

  // Finished jobs by (source, outcome).
  std::map<std::pair<std::string, std::string>, uint64_t> outcomes() const;
  uint64_t prompt_tokens() const;
  uint64_t generated_tokens() const;

  std::string prometheus(const LiveGauges& gauges) const;

 private:
  mutable Mutex mutex_;
  std::map<std::pair<std::string, std::string>, uint64_t> outcomes_ GUARDED_BY(mutex_);
  uint64_t prompt_tokens_ GUARDED_BY(mutex_) = 0;
  uint64_t generated_tokens_ GUARDED_BY(mutex_) = 0;
  double prefill_seconds_ GUARDED_BY(mutex_) = 0;
  double generate_seconds_ GUARDED_BY(mutex_) = 0;
  double last_prefill_tok_s_ GUARDED_BY(mutex_) = 0;
  double last_gen_tok_s_ GUARDED_BY(mutex_) = 0;
  std::array<uint64_t, kTtftBuckets.size()> ttft_buckets_ GUARDED_BY(mutex_){};
  uint64_t ttft_count_ GUARDED_BY(mutex_) = 0;
  double ttft_sum_ GUARDED_BY(mutex_) = 0;
};

}  // namespace revis::node
