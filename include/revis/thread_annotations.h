// Clang's thread-safety annotations (-Wthread-safety), and a mutex that
// carries them: a class states its lock contract in its types
// (GUARDED_BY(mu_) on the fields, REQUIRES(mu_) on the helpers that expect
// the lock held), and clang checks every access at compile time. Other
// compilers see plain std::mutex and no attributes.
//
// Thread-safety: Mutex is std::mutex; MutexLock is a scoped lock.
#pragma once

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define REVIS_THREAD_ATTR(x) __attribute__((x))
#else
#define REVIS_THREAD_ATTR(x)
#endif

#define CAPABILITY(x) REVIS_THREAD_ATTR(capability(x))
#define SCOPED_CAPABILITY REVIS_THREAD_ATTR(scoped_lockable)
#define GUARDED_BY(x) REVIS_THREAD_ATTR(guarded_by(x))
#define PT_GUARDED_BY(x) REVIS_THREAD_ATTR(pt_guarded_by(x))
#define REQUIRES(...) REVIS_THREAD_ATTR(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) REVIS_THREAD_ATTR(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) REVIS_THREAD_ATTR(acquire_capability(__VA_ARGS__))
#define RELEASE(...) REVIS_THREAD_ATTR(release_capability(__VA_ARGS__))

namespace revis {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope. wait() releases it while blocked, as a
// condition variable does, and holds it again on return.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() RELEASE() {}
  template <class Rep, class Period, class Pred>
  bool wait_for(std::condition_variable& cv, std::chrono::duration<Rep, Period> d, Pred pred) {
    return cv.wait_for(lock_, d, std::move(pred));
  }
  template <class Rep, class Period>
  void wait_for(std::condition_variable& cv, std::chrono::duration<Rep, Period> d) {
    cv.wait_for(lock_, d);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace revis
