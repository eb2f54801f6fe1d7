// The Prometheus exposition of the node's counters.
#include <gtest/gtest.h>

#include "node/metrics.h"

namespace revis::node {
namespace {

TEST(Metrics, CountsOutcomesTokensAndTimeToFirstToken) {
  Metrics m;
  JobStats s;
  s.prompt_tokens = 10;
  s.generated_tokens = 5;
  s.ttft_ms = 30;  // 0.03 s: in the 0.05 bucket and above
  s.prefill_tok_s = 100;
  s.gen_tok_s = 50;
  m.job_finished("ticket", "done", &s);
  m.job_finished("ticket", "queue_full", nullptr);
  m.job_finished("openai", "done", &s);
  LiveGauges g;
  g.queue_length = 2;
  g.queue_limit = 8;
  g.busy = true;
  const std::string text = m.prometheus(g);
  for (const char* line : {"revis_jobs_total{source=\"ticket\",outcome=\"done\"} 1\n",
                           "revis_jobs_total{source=\"ticket\",outcome=\"queue_full\"} 1\n",
                           "revis_jobs_total{source=\"openai\",outcome=\"done\"} 1\n", "revis_queue_length 2\n",
                           "revis_busy 1\n", "revis_prompt_tokens_total 20\n", "revis_generated_tokens_total 10\n",
                           "revis_time_to_first_token_seconds_bucket{le=\"0.025\"} 0\n",
                           "revis_time_to_first_token_seconds_bucket{le=\"0.05\"} 2\n",
                           "revis_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n",
                           "revis_time_to_first_token_seconds_count 2\n", "revis_generation_tokens_per_second 50\n",
                           "# TYPE revis_time_to_first_token_seconds histogram\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  EXPECT_EQ(m.prompt_tokens(), 20u);
}

}  // namespace
}  // namespace revis::node
