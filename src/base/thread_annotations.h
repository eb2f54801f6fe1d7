// Clang thread-safety annotations: a lock's contract written in the types, so
// that `-Wthread-safety` rejects a read of a GUARDED_BY member without its
// mutex, or a call of a REQUIRES helper from a caller that does not hold it.
// On compilers without the attributes (GCC) every macro expands to nothing.
//
//   GUARDED_BY(mu)        data member read and written only with mu held
//   REQUIRES(mu)          function called with mu held (and leaves it held)
//   EXCLUDES(mu)          function called without mu (it takes mu itself)
//   ACQUIRE / RELEASE     function that locks / unlocks (on a capability type)
//   CAPABILITY, SCOPED_CAPABILITY  mark a mutex type and an RAII lock type
#pragma once

#if defined(__clang__)
#define REVIS_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define REVIS_THREAD_ATTRIBUTE(x)
#endif

#define CAPABILITY(x) REVIS_THREAD_ATTRIBUTE(capability(x))
#define SCOPED_CAPABILITY REVIS_THREAD_ATTRIBUTE(scoped_lockable)
#define GUARDED_BY(x) REVIS_THREAD_ATTRIBUTE(guarded_by(x))
#define PT_GUARDED_BY(x) REVIS_THREAD_ATTRIBUTE(pt_guarded_by(x))
#define REQUIRES(...) REVIS_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) REVIS_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) REVIS_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define RELEASE(...) REVIS_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) REVIS_THREAD_ATTRIBUTE(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) REVIS_THREAD_ATTRIBUTE(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS REVIS_THREAD_ATTRIBUTE(no_thread_safety_analysis)
