// Jobs this node runs for one client connection, by ticketID: a ticket a
// peer forwarded here (fabric), or one run here because the broker is
// unreachable (broker). The job's token events and its final event go to
// that connection; `cancel` and a disconnect find the job here. Both ticket
// desks keep their connection-bound runs in one.
//
// Thread-safety: every method may be called from any thread; one mutex
// guards the table, and no callback runs under it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "node/executor.h"
#include "node/ticket_desk.h"

namespace revis::node {

class LinkedRuns {
 public:
  using OnEnd = std::function<void(const Outcome<JobResult>& outcome)>;

  // Submits `spec`, ticket `id`, to `executor`; its tokens (when
  // `streaming`) and final event go to `link`, after `on_end` (may be
  // null) has seen the outcome. The executor's refusal comes back as is.
  Outcome<Admission> run(Executor& executor, const std::shared_ptr<ClientLink>& link, const std::string& id, JobSpec spec,
                         bool streaming, OnEnd on_end = nullptr) EXCLUDES(mu_);
  // The job running ticket `id` for `link`; 0 when there is none.
  uint64_t job(ClientLink* link, const std::string& id) const EXCLUDES(mu_);
  // Forgets the runs of `link` (it is gone); their job ids, to cancel.
  std::vector<uint64_t> take(ClientLink* link) EXCLUDES(mu_);
  // Forgets every run (the server has stopped).
  void clear() EXCLUDES(mu_);

 private:
  void forget(ClientLink* link, const std::string& id) EXCLUDES(mu_);

  mutable Mutex mu_;
  std::map<ClientLink*, std::map<std::string, uint64_t>> jobs_ GUARDED_BY(mu_);
};

}  // namespace revis::node
