#include "net/preparation_pool.h"

#include <cstring>
#include <string>
#include <utility>

namespace revis::node {

class PreparationPool::Lane {
 public:
  Mutex mu;
  std::deque<Task> tasks GUARDED_BY(mu);
  bool scheduled GUARDED_BY(mu) = false;  // a step of this lane is queued or running
};

Status PreparationPool::start(int threads, size_t stack_bytes) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  int err = pthread_attr_setstacksize(&attr, stack_bytes);
  for (int i = 0; i < threads && err == 0; ++i) {
    pthread_t t;
    err = pthread_create(&t, &attr, &PreparationPool::thread_main, this);
    if (err == 0) threads_.push_back(t);
  }
  pthread_attr_destroy(&attr);
  if (err != 0)
    return Status::error("cannot start the request preparation threads (" + std::to_string(threads) + ", stacks of " +
                         std::to_string(stack_bytes / 1024) + " KiB): " + std::strerror(err));
  return {};
}

void PreparationPool::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (pthread_t t : threads_) pthread_join(t, nullptr);
  threads_.clear();
}

void* PreparationPool::thread_main(void* pool) {
  static_cast<PreparationPool*>(pool)->run();
  return nullptr;
}

void PreparationPool::run() {
  while (true) {
    Task task;
    {
      MutexLock lock(mu_);
      while (tasks_.empty() && !stopping_) wake_.wait(mu_);
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

std::shared_ptr<PreparationPool::Lane> PreparationPool::new_lane() const { return std::make_shared<Lane>(); }

bool PreparationPool::reserve(bool always) {
  MutexLock lock(mu_);
  if (!always && pending_ >= max_pending_) return false;
  ++pending_;
  return true;
}

// A task counts as pending from its reserve() until it has run; a lane's
// step runs one of the lane's tasks, so it uncounts that one.
void PreparationPool::enqueue(Task task) {
  {
    MutexLock lock(mu_);
    tasks_.push_back([this, task = std::move(task)] {
      task();
      MutexLock done(mu_);
      --pending_;
    });
  }
  wake_.notify_one();
}

bool PreparationPool::post(Task task) {
  if (!reserve(false)) return false;
  enqueue(std::move(task));
  return true;
}

bool PreparationPool::post(const std::shared_ptr<Lane>& lane, Task task) {
  if (!reserve(false)) return false;
  enqueue_lane(lane, std::move(task));
  return true;
}

void PreparationPool::post_always(const std::shared_ptr<Lane>& lane, Task task) {
  reserve(true);
  enqueue_lane(lane, std::move(task));
}

void PreparationPool::enqueue_lane(const std::shared_ptr<Lane>& lane, Task task) {
  bool schedule = false;
  {
    MutexLock lock(lane->mu);
    lane->tasks.push_back(std::move(task));
    schedule = !lane->scheduled;
    lane->scheduled = true;
  }
  if (schedule) enqueue([this, lane] { run_lane_step(lane); });
}

// Runs the lane's first task, then queues the next step behind the other
// work instead of draining the lane, so one busy connection cannot hold a
// thread.
void PreparationPool::run_lane_step(const std::shared_ptr<Lane>& lane) {
  Task task;
  {
    MutexLock lock(lane->mu);
    task = std::move(lane->tasks.front());
    lane->tasks.pop_front();
  }
  task();
  bool more = false;
  {
    MutexLock lock(lane->mu);
    more = !lane->tasks.empty();
    lane->scheduled = more;
  }
  if (more) enqueue([this, lane] { run_lane_step(lane); });
}

}  // namespace revis::node
