// Status and Result<T>: how errors cross module boundaries in revis.
//
// A Status is either ok or carries one human-readable message that says
// where (file, field) and why (expected vs found). Functions that can fail
// return Status or Result<T>; exceptions never cross a module boundary.
// Both types are plain values and safe to copy between threads.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace revis {

class Status {
 public:
  Status() = default;  // ok
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("loading model.gguf: ") to an error; ok stays ok.
  Status with_context(const std::string& context) const {
    return ok() ? *this : Status(context + ": " + message_);
  }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}                  // NOLINT: implicit on purpose
  Result(Status error) : status_(std::move(error)) {}           // NOLINT: implicit on purpose

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace revis
