#include "node/metrics.h"

#include <cstdio>

namespace revis::node {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name, double value) { out += name + ' ' + num(value) + '\n'; }

}  // namespace

void Metrics::job_finished(std::string_view source, std::string_view outcome, const JobStats* stats) {
  MutexLock lock(mutex_);
  ++outcomes_[{std::string(source), std::string(outcome)}];
  if (!stats) return;
  prompt_tokens_ += static_cast<uint64_t>(stats->prompt_tokens);
  generated_tokens_ += static_cast<uint64_t>(stats->generated_tokens);
  prefill_seconds_ += stats->prefill_ms / 1000;
  generate_seconds_ += stats->generate_ms / 1000;
  if (stats->prefill_tok_s > 0) last_prefill_tok_s_ = stats->prefill_tok_s;
  if (stats->gen_tok_s > 0) last_gen_tok_s_ = stats->gen_tok_s;
  if (stats->generated_tokens > 0) {
    const double ttft = stats->ttft_ms / 1000;
    for (size_t i = 0; i < kTtftBuckets.size(); ++i)
      if (ttft <= kTtftBuckets[i]) ++ttft_buckets_[i];
    ++ttft_count_;
    ttft_sum_ += ttft;
  }
}

std::map<std::pair<std::string, std::string>, uint64_t> Metrics::outcomes() const {
  MutexLock lock(mutex_);
  return outcomes_;
}

uint64_t Metrics::prompt_tokens() const {
  MutexLock lock(mutex_);
  return prompt_tokens_;
}

uint64_t Metrics::generated_tokens() const {
  MutexLock lock(mutex_);
  return generated_tokens_;
}

std::string Metrics::prometheus(const LiveGauges& g) const {
  MutexLock lock(mutex_);
  std::string out;
  header(out, "revis_jobs_total", "counter", "Finished jobs by source (ticket, openai) and outcome (done or error code).");
  for (const auto& [key, n] : outcomes_)
    sample(out, "revis_jobs_total{source=\"" + key.first + "\",outcome=\"" + key.second + "\"}", double(n));
  header(out, "revis_queue_length", "gauge", "Jobs waiting in the queue.");
  sample(out, "revis_queue_length", g.queue_length);
  header(out, "revis_queue_limit", "gauge", "Capacity of the queue.");
  sample(out, "revis_queue_limit", g.queue_limit);
  header(out, "revis_busy", "gauge", "1 while an inference runs.");
  sample(out, "revis_busy", g.busy ? 1 : 0);
  header(out, "revis_slots", "gauge", "Jobs one forward pass may carry (--parallel).");
  sample(out, "revis_slots", g.slots);
  header(out, "revis_slots_busy", "gauge", "Jobs in the batch now.");
  sample(out, "revis_slots_busy", g.slots_busy);
  header(out, "revis_gpu_layers", "gauge", "Layers of the loaded models a GPU runs (--device, -ngl).");
  sample(out, "revis_gpu_layers", g.gpu_layers);
  header(out, "revis_gpu_memory_bytes", "gauge", "GPU memory the loaded models' layers take.");
  sample(out, "revis_gpu_memory_bytes", double(g.gpu_bytes));
  header(out, "revis_prompt_tokens_total", "counter", "Prompt tokens processed.");
  sample(out, "revis_prompt_tokens_total", double(prompt_tokens_));
  header(out, "revis_generated_tokens_total", "counter", "Tokens generated.");
  sample(out, "revis_generated_tokens_total", double(generated_tokens_));
  header(out, "revis_prefill_seconds_total", "counter", "Time spent in prefill.");
  sample(out, "revis_prefill_seconds_total", prefill_seconds_);
  header(out, "revis_generate_seconds_total", "counter", "Time spent generating.");
  sample(out, "revis_generate_seconds_total", generate_seconds_);
  header(out, "revis_prefill_tokens_per_second", "gauge", "Prefill speed of the last job.");
  sample(out, "revis_prefill_tokens_per_second", last_prefill_tok_s_);
  header(out, "revis_generation_tokens_per_second", "gauge", "Generation speed of the last job.");
  sample(out, "revis_generation_tokens_per_second", last_gen_tok_s_);
  header(out, "revis_time_to_first_token_seconds", "histogram",
         "From request arrival to the first sampled token (queue wait, load and prefill included).");
  for (size_t i = 0; i < kTtftBuckets.size(); ++i)
    sample(out, "revis_time_to_first_token_seconds_bucket{le=\"" + num(kTtftBuckets[i]) + "\"}", double(ttft_buckets_[i]));
  sample(out, "revis_time_to_first_token_seconds_bucket{le=\"+Inf\"}", double(ttft_count_));
  sample(out, "revis_time_to_first_token_seconds_sum", ttft_sum_);
  sample(out, "revis_time_to_first_token_seconds_count", double(ttft_count_));
  header(out, "revis_models_loaded", "gauge", "Models resident now.");
  sample(out, "revis_models_loaded", g.models_loaded);
  header(out, "revis_model_resident_bytes", "gauge", "Estimated memory of the resident models.");
  sample(out, "revis_model_resident_bytes", double(g.resident_bytes));
  header(out, "revis_model_loads_total", "counter", "Model loads since start.");
  sample(out, "revis_model_loads_total", double(g.model_loads));
  header(out, "revis_uptime_seconds", "gauge", "Seconds since the node started.");
  sample(out, "revis_uptime_seconds", g.uptime_s);
  return out;
}

}  // namespace revis::node
