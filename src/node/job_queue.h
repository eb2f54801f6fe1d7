// The executor's waiting line: a bounded FIFO of jobs.
//
// Bounded because a node that accepts work it cannot start soon only hides
// overload from the dispatcher: when the line is full, push() refuses and
// the client hears queue_full at once and can go elsewhere. Jobs leave in
// arrival order, or early when cancelled (remove()).
//
// Thread-safety: none; the executor guards its JobQueue with its own mutex.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "protocol/job.h"

namespace revis::node {

struct QueuedJob {
  uint64_t id = 0;
  JobSpec spec;
  JobCallbacks callbacks;
  std::atomic<bool> cancel{false};  // set by Executor::cancel; the inference loop polls it
  std::string cancel_reason;        // written before `cancel` is set, under the executor's lock
};

class JobQueue {
 public:
  explicit JobQueue(size_t capacity) : capacity_(capacity) {}

  // Appends; false (and nothing changes) when the queue is full.
  bool push(std::shared_ptr<QueuedJob> job);
  // Puts a job first, even beyond the capacity: one that was already
  // accepted and comes back (its remote run failed) must not be refused.
  void push_front(std::shared_ptr<QueuedJob> job);
  // The oldest job, or nullptr when empty.
  std::shared_ptr<QueuedJob> pop();
  // The oldest job `pick` accepts, left in place; nullptr if none.
  template <typename Pick>
  std::shared_ptr<QueuedJob> find_first(Pick&& pick) const {
    for (const auto& job : jobs_)
      if (pick(*job)) return job;
    return nullptr;
  }
  // The oldest job, left in place; nullptr when empty.
  const std::shared_ptr<QueuedJob>& front() const { return jobs_.front(); }
  // Takes out the job with this id wherever it is; nullptr if absent.
  std::shared_ptr<QueuedJob> remove(uint64_t id);
  // Takes out everything, oldest first.
  std::vector<std::shared_ptr<QueuedJob>> drain();

  size_t size() const { return jobs_.size(); }
  size_t capacity() const { return capacity_; }
  bool empty() const { return jobs_.empty(); }
  bool full() const { return jobs_.size() >= capacity_; }

 private:
  size_t capacity_;
  std::deque<std::shared_ptr<QueuedJob>> jobs_;
};

}  // namespace revis::node
