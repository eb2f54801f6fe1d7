// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable_any
// with clang thread-safety annotations (base/thread_annotations.h), so the
// members a mutex guards are declared GUARDED_BY it and clang checks every
// access. Use them instead of the bare std types in mutex-protected classes:
//
//   Mutex mutex_;
//   CondVar wake_;
//   int queued_ GUARDED_BY(mutex_) = 0;
//   ...
//   MutexLock lock(mutex_);
//   while (queued_ == 0) wake_.wait(mutex_);   // a loop, not a predicate
//
// A predicate lambda is checked as a function of its own that holds no lock,
// so waits are written as loops at the call site. Thread-safety: as std::mutex
// and std::condition_variable_any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.h"

namespace revis {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mutex_.lock(); }
  void unlock() RELEASE() { mutex_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mutex_.try_lock(); }

 private:
  std::mutex mutex_;
};

// Holds a Mutex for the rest of the scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~MutexLock() RELEASE() { mutex_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mutex_;
};

// A condition variable waited on with a held Mutex, which it releases while
// asleep and holds again on return (spurious wake-ups included).
class CondVar {
 public:
  void wait(Mutex& mutex) REQUIRES(mutex) { cv_.wait(mutex); }
  // False when `deadline` passed.
  template <class Clock, class Duration>
  bool wait_until(Mutex& mutex, std::chrono::time_point<Clock, Duration> deadline) REQUIRES(mutex) {
    return cv_.wait_until(mutex, deadline) == std::cv_status::no_timeout;
  }
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace revis
