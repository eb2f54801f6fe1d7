// The bounded FIFO the executor keeps its waiting jobs in.
#include <gtest/gtest.h>

#include "node/job_queue.h"

namespace revis::node {
namespace {

std::shared_ptr<QueuedJob> job(uint64_t id) {
  auto j = std::make_shared<QueuedJob>();
  j->id = id;
  return j;
}

TEST(JobQueue, BoundHoldsAndOrderIsFifo) {
  JobQueue q(3);
  EXPECT_TRUE(q.push(job(1)));
  EXPECT_TRUE(q.push(job(2)));
  EXPECT_TRUE(q.push(job(3)));
  EXPECT_TRUE(q.full());
  EXPECT_FALSE(q.push(job(4))) << "a full queue refuses";
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.pop()->id, 1u);
  EXPECT_TRUE(q.push(job(5))) << "room again after a pop";
  EXPECT_EQ(q.pop()->id, 2u);
  EXPECT_EQ(q.pop()->id, 3u);
  EXPECT_EQ(q.pop()->id, 5u);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

TEST(JobQueue, RemoveAndDrain) {
  JobQueue q(10);
  for (uint64_t i = 1; i <= 5; ++i) q.push(job(i));
  EXPECT_EQ(q.remove(3)->id, 3u);
  EXPECT_EQ(q.remove(3), nullptr);
  EXPECT_EQ(q.remove(42), nullptr);
  auto rest = q.drain();
  ASSERT_EQ(rest.size(), 4u);
  EXPECT_EQ(rest[0]->id, 1u);
  EXPECT_EQ(rest[2]->id, 4u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace revis::node
