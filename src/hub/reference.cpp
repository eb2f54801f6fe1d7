#include "hub/reference.h"

#include <algorithm>
#include <cctype>

#include "hub/listing.h"

namespace revis::hub {
namespace {

// The hub's repository and organisation names: letters, digits, '-', '_'
// and '.', not starting with '-' or '.' (so "." and ".." never pass).
bool is_hub_name(std::string_view name) {
  if (name.empty() || name.size() > 96 || name.front() == '-' || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

std::optional<ModelReference> parse_reference(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view repo = text.substr(0, colon);
  const std::string_view tag = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  const size_t slash = repo.find('/');
  if (slash == std::string_view::npos || !is_hub_name(repo.substr(0, slash)) || !is_hub_name(repo.substr(slash + 1)))
    return std::nullopt;
  // "dir/model.gguf" is a path that does not exist, not a repository.
  if (colon == std::string_view::npos && is_gguf_name(repo)) return std::nullopt;
  if (colon != std::string_view::npos && (tag.empty() || tag.find("..") != std::string_view::npos || tag.front() == '/'))
    return std::nullopt;
  return ModelReference{std::string(repo), std::string(tag)};
}

}  // namespace revis::hub
