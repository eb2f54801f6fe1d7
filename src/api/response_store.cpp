#include "api/response_store.h"

#include "base/json_text.h"

namespace revis::node {

void ResponseStore::keep(const std::string& id, StoredResponse response) {
  // Measured before the lock: the conversation may be long.
  const size_t bytes = json_text(response.conversation).size() + json_text(response.output).size() + response.object.size();
  if (bytes > max_bytes_ || max_responses_ == 0) return;
  auto shared = std::make_shared<const StoredResponse>(std::move(response));
  MutexLock lock(mutex_);
  if (auto old = by_id_.find(id); old != by_id_.end()) drop(old);
  while (!order_.empty() && (by_id_.size() >= max_responses_ || bytes_ + bytes > max_bytes_))
    drop(by_id_.find(order_.front()));
  order_.push_back(id);
  by_id_.emplace(id, Entry{std::move(shared), bytes, std::prev(order_.end())});
  bytes_ += bytes;
}

std::shared_ptr<const StoredResponse> ResponseStore::find(const std::string& id) const {
  MutexLock lock(mutex_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second.response;
}

bool ResponseStore::forget(const std::string& id) {
  MutexLock lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  drop(it);
  return true;
}

size_t ResponseStore::size() const {
  MutexLock lock(mutex_);
  return by_id_.size();
}

void ResponseStore::drop(std::unordered_map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  order_.erase(it->second.position);
  by_id_.erase(it);
}

}  // namespace revis::node
