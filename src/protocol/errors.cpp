#include "protocol/errors.h"

#include <array>

namespace revis::node {
namespace {

constexpr std::array<std::pair<ErrorCode, const char*>, 10> kNames = {{
    {ErrorCode::kBadRequest, "bad_request"},
    {ErrorCode::kUnknownTask, "unknown_task"},
    {ErrorCode::kMissingArg, "missing_arg"},
    {ErrorCode::kTooLong, "too_long"},
    {ErrorCode::kQueueFull, "queue_full"},
    {ErrorCode::kModelUnavailable, "model_unavailable"},
    {ErrorCode::kCancelled, "cancelled"},
    {ErrorCode::kInternal, "internal"},
    {ErrorCode::kCatalogMismatch, "catalog_mismatch"},
    {ErrorCode::kUnknownTicket, "unknown_ticket"},
}};

}  // namespace

const char* error_code_name(ErrorCode code) {
  for (const auto& [c, name] : kNames)
    if (c == code) return name;
  return "internal";
}

std::optional<ErrorCode> error_code_from_name(std::string_view name) {
  for (const auto& [c, n] : kNames)
    if (name == n) return c;
  return std::nullopt;
}

}  // namespace revis::node
