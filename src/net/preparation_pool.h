// Threads that prepare requests (parse a body, convert it, compile its
// grammar, admit its ticket) so that the server's I/O thread only does I/O:
// /health, /metrics, WebSocket pings and other clients' streams keep moving
// while one request is worked on. Preparation is not inference; the one
// forward pass at a time still runs on the executor's thread.
//
// The threads get an explicit stack size, so the parsers' depth limits
// hold the same on every platform. At most max_pending tasks wait:
// post() refuses past that and the caller answers "busy".
//
// A Lane orders a connection's work: its tasks run one at a time, in post
// order (a ticket, then its cancel, then the connection's end), while
// other lanes' tasks run beside them.
//
// Thread-safety: everything may be called from any thread. stop() (or
// the destructor) joins the threads; tasks still waiting are dropped.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "base/mutex.h"
#include "revis/status.h"

namespace revis::node {

class PreparationPool {
 public:
  class Lane;
  using Task = std::function<void()>;

  explicit PreparationPool(size_t max_pending) : max_pending_(max_pending) {}
  ~PreparationPool() { stop(); }
  PreparationPool(const PreparationPool&) = delete;
  PreparationPool& operator=(const PreparationPool&) = delete;

  // Starts `threads` threads with stacks of `stack_bytes`.
  Status start(int threads, size_t stack_bytes);
  void stop() EXCLUDES(mu_);

  std::shared_ptr<Lane> new_lane() const;
  // False (and `task` dropped) when max_pending tasks already wait.
  bool post(Task task) EXCLUDES(mu_);
  bool post(const std::shared_ptr<Lane>& lane, Task task) EXCLUDES(mu_);
  // Queued even past max_pending: what must follow the lane's earlier
  // tasks whatever the load (a connection's end).
  void post_always(const std::shared_ptr<Lane>& lane, Task task) EXCLUDES(mu_);

 private:
  static void* thread_main(void* pool);
  void run() EXCLUDES(mu_);
  bool reserve(bool always) EXCLUDES(mu_);
  void enqueue(Task task) EXCLUDES(mu_);
  void enqueue_lane(const std::shared_ptr<Lane>& lane, Task task);
  void run_lane_step(const std::shared_ptr<Lane>& lane);

  const size_t max_pending_;
  Mutex mu_;
  CondVar wake_;
  std::deque<Task> tasks_ GUARDED_BY(mu_);
  size_t pending_ GUARDED_BY(mu_) = 0;  // posted, not finished (lanes' tasks included)
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<pthread_t> threads_;  // set by start(), joined by stop()
};

}  // namespace revis::node
