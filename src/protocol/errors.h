// The node's machine-readable error codes and the value that carries one.
//
// Status (revis/status.h) says why something failed in words; a node must
// also tell a remote client *what kind* of failure it was, so that a
// dispatcher can retry elsewhere (queue_full, model_unavailable), give up
// (bad_request, unknown_task) or report (internal). NodeError pairs the two,
// and Outcome<T> is the node's Result<T> with a code. Plain values, safe to
// copy between threads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace revis::node {

enum class ErrorCode {
  kBadRequest,        // malformed JSON, wrong types, unknown fields, duplicate ticket id
  kUnknownTask,       // taskType not in the catalogue
  kMissingArg,        // a required argument is absent or empty
  kTooLong,           // message over the size limit, or prompt longer than the context
  kQueueFull,         // the bounded queue is full: try later or elsewhere
  kModelUnavailable,  // the task's tier is not served here or its model failed to load
  kCancelled,         // cancelled by the client, a disconnect or shutdown
  kInternal,          // a bug or an unexpected engine failure
  kCatalogMismatch,   // the ticket pins another catalogue digest
  kUnknownTicket,     // resume of a ticket this node does not know (never seen, or its result expired)
};

// The wire name: "bad_request", "unknown_task", ...
const char* error_code_name(ErrorCode code);
// Inverse of error_code_name; nullopt for an unknown name.
std::optional<ErrorCode> error_code_from_name(std::string_view name);

struct NodeError {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

// Either a T or a NodeError.
template <typename T>
class Outcome {
 public:
  Outcome(T value) : v_(std::move(value)) {}           // NOLINT: implicit on purpose
  Outcome(NodeError error) : v_(std::move(error)) {}   // NOLINT: implicit on purpose
  static Outcome fail(ErrorCode code, std::string message) { return NodeError{code, std::move(message)}; }

  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  const NodeError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, NodeError> v_;
};

}  // namespace revis::node
