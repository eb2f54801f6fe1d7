#include "hub/models_dir.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "hub/download.h"

namespace revis::hub {
namespace fs = std::filesystem;

Result<std::string> default_models_dir(const Getenv& getenv) {
  auto set = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v && *v ? v : "";
  };
  if (std::string dir = set("REVIS_MODELS_DIR"); !dir.empty()) return dir;
  if (std::string cache = set("XDG_CACHE_HOME"); !cache.empty()) return cache + "/revis/models";
  if (std::string home = set("HOME"); !home.empty()) return home + "/.cache/revis/models";
  return Status::error("no models directory: set REVIS_MODELS_DIR, XDG_CACHE_HOME or HOME, or give --models-dir");
}

std::string repo_dir(const std::string& dir, const std::string& repo) { return (fs::path(dir) / repo).string(); }

std::vector<RepoFile> local_files(const std::string& dir, const std::string& repo) {
  std::vector<RepoFile> files;
  const fs::path root = repo_dir(dir, repo);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    files.push_back({.name = fs::relative(it->path(), root, ec).string(), .size = it->file_size(ec)});
  }
  return files;
}

std::vector<LocalModel> list_local_models(const std::string& dir) {
  std::vector<LocalModel> out;
  std::error_code ec;
  std::vector<std::string> repos;
  for (auto org = fs::directory_iterator(dir, ec); !ec && org != fs::directory_iterator(); org.increment(ec)) {
    if (!org->is_directory(ec)) continue;
    std::error_code inner;
    for (auto repo = fs::directory_iterator(org->path(), inner); !inner && repo != fs::directory_iterator(); repo.increment(inner))
      if (repo->is_directory(inner)) repos.push_back(org->path().filename().string() + "/" + repo->path().filename().string());
  }
  std::sort(repos.begin(), repos.end());
  for (const std::string& repo : repos)
    for (ModelFiles& m : group_models(local_files(dir, repo))) {
      LocalModel local{.repo = repo, .model = std::move(m)};
      for (const RepoFile& f : local.model.parts) local.bytes += f.size;
      out.push_back(std::move(local));
    }
  return out;
}

Result<std::string> find_local_model(const std::string& dir, const ModelReference& ref) {
  auto chosen = choose_model(local_files(dir, ref.repo), ref.repo + " in " + dir, ref.tag);
  if (!chosen.ok()) return chosen.status();
  return (fs::path(repo_dir(dir, ref.repo)) / chosen->parts.front().name).string();
}

Result<std::vector<std::string>> remove_local_model(const std::string& dir, const ModelReference& ref) {
  auto chosen = choose_model(local_files(dir, ref.repo), ref.repo + " in " + dir, ref.tag);
  if (!chosen.ok()) return chosen.status();
  const fs::path root = repo_dir(dir, ref.repo);
  std::vector<std::string> removed;
  for (const RepoFile& f : chosen->parts) {
    const fs::path path = root / f.name;
    std::error_code ec;
    if (!fs::remove(path, ec) || ec) return Status::error(path.string() + ": cannot delete: " + ec.message());
    removed.push_back(path.string());
    if (fs::remove(partial_path(path.string()), ec)) removed.push_back(partial_path(path.string()));
    // The directories the file was in, below DIR, once empty.
    for (fs::path rel = (fs::path(ref.repo) / f.name).parent_path(); !rel.empty(); rel = rel.parent_path()) {
      if (!fs::is_empty(fs::path(dir) / rel, ec) || ec) break;
      fs::remove(fs::path(dir) / rel, ec);
    }
  }
  return removed;
}

}  // namespace revis::hub
