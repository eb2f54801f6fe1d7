#include "node/linked_runs.h"

namespace revis::node {

Outcome<Admission> LinkedRuns::run(Executor& executor, const std::shared_ptr<ClientLink>& link, const std::string& id,
                                   JobSpec spec, bool streaming, OnEnd on_end) {
  JobCallbacks callbacks;
  if (streaming) stream_token_events(callbacks, id, [link](TicketEvent event) { link->send(std::move(event)); });
  callbacks.on_finish = [this, link, id, on_end = std::move(on_end)](Outcome<JobResult> outcome) {
    forget(link.get(), id);
    if (on_end) on_end(outcome);
    link->send(outcome.ok() ? done_event(id, *outcome) : error_event(id, outcome.error()));
  };
  MutexLock lock(mu_);  // held over submit: on_finish (later, on the executor's thread) forgets what this records
  auto admission = executor.submit(std::move(spec), std::move(callbacks));
  if (admission.ok()) jobs_[link.get()][id] = admission->job_id;
  return admission;
}

uint64_t LinkedRuns::job(ClientLink* link, const std::string& id) const {
  MutexLock lock(mu_);
  auto it = jobs_.find(link);
  if (it == jobs_.end()) return 0;
  auto job = it->second.find(id);
  return job == it->second.end() ? 0 : job->second;
}

std::vector<uint64_t> LinkedRuns::take(ClientLink* link) {
  std::vector<uint64_t> jobs;
  MutexLock lock(mu_);
  if (auto it = jobs_.find(link); it != jobs_.end()) {
    for (const auto& [id, job] : it->second) jobs.push_back(job);
    jobs_.erase(it);
  }
  return jobs;
}

void LinkedRuns::clear() {
  MutexLock lock(mu_);
  jobs_.clear();
}

void LinkedRuns::forget(ClientLink* link, const std::string& id) {
  MutexLock lock(mu_);
  if (auto it = jobs_.find(link); it != jobs_.end()) {
    it->second.erase(id);
    if (it->second.empty()) jobs_.erase(it);
  }
}

}  // namespace revis::node
