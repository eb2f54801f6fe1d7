#include "node/job_queue.h"

#include <algorithm>

namespace revis::node {

bool JobQueue::push(std::shared_ptr<QueuedJob> job) {
  if (full()) return false;
  jobs_.push_back(std::move(job));
  return true;
}

void JobQueue::push_front(std::shared_ptr<QueuedJob> job) { jobs_.push_front(std::move(job)); }

std::shared_ptr<QueuedJob> JobQueue::pop() {
  if (jobs_.empty()) return nullptr;
  std::shared_ptr<QueuedJob> job = std::move(jobs_.front());
  jobs_.pop_front();
  return job;
}

std::shared_ptr<QueuedJob> JobQueue::remove(uint64_t id) {
  auto it = std::find_if(jobs_.begin(), jobs_.end(), [id](const auto& j) { return j->id == id; });
  if (it == jobs_.end()) return nullptr;
  std::shared_ptr<QueuedJob> job = std::move(*it);
  jobs_.erase(it);
  return job;
}

std::vector<std::shared_ptr<QueuedJob>> JobQueue::drain() {
  std::vector<std::shared_ptr<QueuedJob>> all(std::make_move_iterator(jobs_.begin()),
                                             std::make_move_iterator(jobs_.end()));
  jobs_.clear();
  return all;
}

}  // namespace revis::node
