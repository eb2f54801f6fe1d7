#include "hub/listing.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace revis::hub {

bool is_safe_relative_path(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.find('\\') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos)
    return false;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = std::min(name.find('/', start), name.size());
    const std::string_view part = name.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

bool is_gguf_name(std::string_view name) {
  constexpr std::string_view kSuffix = ".gguf";
  return name.size() >= kSuffix.size() &&
         std::equal(kSuffix.begin(), kSuffix.end(), name.end() - kSuffix.size(),
                    [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
}

bool is_sha256_hex(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c); });
}

Result<std::vector<RepoFile>> parse_listing(std::string_view json_text, const std::string& origin) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::error(origin + ": the hub's answer is not JSON");
  if (!j.is_object() || !j.contains("siblings") || !j["siblings"].is_array())
    return Status::error(origin + ": the hub's answer has no \"siblings\" array of files");
  std::vector<RepoFile> files;
  for (size_t i = 0; i < j["siblings"].size(); ++i) {
    const nlohmann::json& s = j["siblings"][i];
    const std::string where = origin + ": siblings[" + std::to_string(i) + "]";
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string())
      return Status::error(where + ": expected an object with a string \"rfilename\"");
    RepoFile f{.name = s["rfilename"].get<std::string>()};
    if (!is_safe_relative_path(f.name)) return Status::error(where + ": unsafe file name \"" + f.name + "\"");
    if (s.contains("size") && s["size"].is_number_unsigned()) f.size = s["size"].get<uint64_t>();
    if (s.contains("lfs") && s["lfs"].is_object()) {
      const nlohmann::json& lfs = s["lfs"];
      if (lfs.contains("sha256") && lfs["sha256"].is_string()) {
        f.sha256 = lfs["sha256"].get<std::string>();
        if (!is_sha256_hex(f.sha256)) return Status::error(where + ".lfs.sha256: expected 64 hex digits, got \"" + f.sha256 + "\"");
        std::transform(f.sha256.begin(), f.sha256.end(), f.sha256.begin(), [](unsigned char c) { return std::tolower(c); });
      }
      if (lfs.contains("size") && lfs["size"].is_number_unsigned()) f.size = lfs["size"].get<uint64_t>();
    }
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace revis::hub
