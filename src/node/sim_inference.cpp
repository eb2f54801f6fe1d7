#include "node/sim_inference.h"

#include <algorithm>
#include <array>
#include <thread>

#include "sample/sampler.h"

namespace revis::node {
namespace {

using Clock = std::chrono::steady_clock;

// Sleeping in slices bounds how long a cancel waits to be noticed.
constexpr auto kCancelSlice = std::chrono::milliseconds(10);

constexpr std::array<std::string_view, 16> kWords = {
    " lorem", " ipsum", " dolor", " sit",  " amet",   " sed",    " do",     " tempor",
    " magna", " enim",  " minim", " quis", " nisi",   " velit",  " culpa",  " est"};

bool cancelled(const GenerateOptions& c) { return c.cancel && c.cancel->load(std::memory_order_relaxed); }

// Sleeps until `deadline`; false if cancelled meanwhile.
bool wait_until(Clock::time_point deadline, const GenerateOptions& control) {
  while (Clock::now() < deadline) {
    if (cancelled(control)) return false;
    std::this_thread::sleep_until(std::min(deadline, Clock::now() + kCancelSlice));
  }
  return !cancelled(control);
}

Clock::duration to_duration(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

int estimate_tokens(std::string_view text) {
  if (text.empty()) return 0;
  return static_cast<int>(std::max<size_t>(1, (text.size() + 3) / 4));
}

Result<GenerateResult> run_simulated_inference(const SimEngineOptions& options, int n_prompt,
                                               const GenerateOptions& control, const TextSink& on_text) {
  if (!(options.tokens_per_s > 0) || !(options.prefill_tokens_per_s > 0))
    return Status::error("the simulated engine needs positive token rates");
  if (n_prompt <= 0) return Status::error("the prompt is empty");
  GenerateResult result;
  result.n_prompt = n_prompt;
  result.stop_reason = "length";

  const auto start = Clock::now();
  if (!wait_until(start + to_duration(n_prompt / options.prefill_tokens_per_s), control)) {
    result.stop_reason = "cancelled";
    result.prefill_ms = ms_between(start, Clock::now());
    return result;
  }
  const auto prefill_end = Clock::now();
  result.prefill_ms = ms_between(start, prefill_end);
  if (control.on_progress) control.on_progress(n_prompt, 0);

  // Like the real engine, the first token comes from the prefill's logits;
  // each later one costs one step.
  Rng rng(control.sampling.seed);
  for (int i = 0; i < control.max_tokens; ++i) {
    if (i > 0 && !wait_until(prefill_end + to_duration(i / options.tokens_per_s), control)) {
      result.stop_reason = "cancelled";
      break;
    }
    if (cancelled(control)) {
      result.stop_reason = "cancelled";
      break;
    }
    if (i == 0) {
      result.first_token = Clock::now();
      result.ttft_ms = ms_between(start, result.first_token);
    }
    const size_t index = rng.next() % kWords.size();
    result.generated.push_back(static_cast<int32_t>(index));
    const std::string_view word = kWords[index];
    result.text += word;
    if (on_text) on_text(word);
    if (control.on_progress) control.on_progress(n_prompt, static_cast<int>(result.generated.size()));
  }
  if (!result.generated.empty()) result.generate_ms = ms_between(result.first_token, Clock::now());
  return result;
}

}  // namespace revis::node
