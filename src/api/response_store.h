// The responses this node made through OpenAI's Responses API (with
// `store`, the default), kept in memory so that a later request can
// continue one (`previous_response_id`) and a client can read one back or
// delete it (GET and DELETE /v1/responses/{id}). Each entry holds what a
// continuation needs: the conversation's items that led to the response
// (earlier responses' included; instructions are not carried over, as
// OpenAI does it), its output items, and the response object as sent.
//
// Bounded: at most `max_responses` responses and `max_bytes` of their JSON
// text together; past either, the oldest go first. Nothing is written to
// disk, so a restart forgets them all, and each node keeps its own: a
// continuation must reach the node that made the response.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/mutex.h"

namespace revis::node {

struct StoredResponse {
  nlohmann::json conversation = nlohmann::json::array();  // the input items before its output, in order
  nlohmann::json output = nlohmann::json::array();        // its output items
  std::string object;                                     // the response object (JSON text)
};

class ResponseStore {
 public:
  static constexpr size_t kMaxResponses = 1000;
  static constexpr size_t kMaxBytes = size_t{64} << 20;

  explicit ResponseStore(size_t max_responses = kMaxResponses, size_t max_bytes = kMaxBytes)
      : max_responses_(max_responses), max_bytes_(max_bytes) {}

  // Keeps `response` under `id` (a new id), dropping the oldest past the
  // bounds. One larger than max_bytes alone is not kept.
  void keep(const std::string& id, StoredResponse response) EXCLUDES(mutex_);
  // The response kept under `id`, or null.
  std::shared_ptr<const StoredResponse> find(const std::string& id) const EXCLUDES(mutex_);
  // False when nothing was kept under `id`.
  bool forget(const std::string& id) EXCLUDES(mutex_);
  size_t size() const EXCLUDES(mutex_);

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> response;
    size_t bytes = 0;
    std::list<std::string>::iterator position;  // in order_
  };
  void drop(std::unordered_map<std::string, Entry>::iterator it) REQUIRES(mutex_);

  const size_t max_responses_, max_bytes_;
  mutable Mutex mutex_;
  std::unordered_map<std::string, Entry> by_id_ GUARDED_BY(mutex_);
  std::list<std::string> order_ GUARDED_BY(mutex_);  // ids, oldest first
  size_t bytes_ GUARDED_BY(mutex_) = 0;
};

}  // namespace revis::node
