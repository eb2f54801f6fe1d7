#include "hub/pull.h"

#include <cctype>
#include <cstdio>
#include <filesystem>

#include "hub/download.h"
#include "hub/file_choice.h"
#include "hub/http_get.h"
#include "hub/listing.h"

namespace revis::hub {
namespace fs = std::filesystem;
namespace {

constexpr size_t kListingLimit = 32u << 20;

// A repository path in a URL: every byte but the unreserved ones and '/'
// percent-encoded (file names may hold spaces, '+', '#').
std::string url_path(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string size_text(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  return text;
}

}  // namespace

Result<HubOptions> hub_options_from_environment(const Getenv& getenv) {
  HubOptions options;
  if (const char* endpoint = getenv("HF_ENDPOINT"); endpoint && *endpoint) options.endpoint = endpoint;
  while (!options.endpoint.empty() && options.endpoint.back() == '/') options.endpoint.pop_back();
  if (auto url = parse_url(options.endpoint); !url.ok()) return url.status().with_context("HF_ENDPOINT");
  if (const char* token = getenv("HF_TOKEN"); token && *token) options.token = token;
  if (const char* offline = getenv("HF_HUB_OFFLINE"); offline && *offline)
    options.offline = std::string(offline) != "0" && std::string(offline) != "false";
  auto dir = default_models_dir(getenv);
  if (!dir.ok()) return dir.status();
  options.models_dir = *dir;
  return options;
}

Result<std::string> pull_model(const ModelReference& ref, const HubOptions& options, const PullEvents& events) {
  auto note = [&](const std::string& message) {
    if (events.note) events.note(message);
  };
  const GetOptions get{.bearer = options.token, .timeout_ms = options.timeout_ms};
  const std::string listing_url = options.endpoint + "/api/models/" + url_path(ref.repo) + "?blobs=true";
  auto listing = http_get_text(listing_url, get, kListingLimit);
  if (!listing.ok()) return listing.status().with_context("listing " + ref.repo);
  if (listing->response.status != 200) return answer_error(listing->response.status, "listing " + ref.repo, !options.token.empty());
  auto files = parse_listing(listing->body, listing_url);
  if (!files.ok()) return files.status();
  auto chosen = choose_model(*files, ref.repo + " on " + options.endpoint, ref.tag);
  if (!chosen.ok()) return chosen.status();
  uint64_t bytes = 0;
  for (const RepoFile& f : chosen->parts) bytes += f.size;
  note((ref.tag.empty() ? "no tag given: chose " : "chose ") + (chosen->quant.empty() ? chosen->label : chosen->quant) + ": " +
       chosen->parts.front().name + (chosen->parts.size() > 1 ? " and " + std::to_string(chosen->parts.size() - 1) + " more parts" : "") +
       (bytes ? " (" + size_text(bytes) + ")" : ""));
  const fs::path root = repo_dir(options.models_dir, ref.repo);
  for (const RepoFile& f : chosen->parts) {
    const fs::path path = root / f.name;
    std::error_code ec;
    if (fs::is_regular_file(path, ec) && (f.size == 0 || fs::file_size(path, ec) == f.size)) {
      note(path.string() + " is there already");
      continue;
    }
    fs::create_directories(path.parent_path(), ec);
    if (ec) return Status::error(path.parent_path().string() + ": cannot create: " + ec.message());
    auto done = download_file({.url = options.endpoint + "/" + url_path(ref.repo) + "/resolve/main/" + url_path(f.name),
                               .bearer = options.token,
                               .path = path.string(),
                               .expected_sha256 = f.sha256,
                               .progress = [&](uint64_t have, uint64_t total) {
                                 if (events.progress) events.progress(f.name, have, total ? total : f.size);
                               },
                               .timeout_ms = options.timeout_ms});
    if (!done.ok()) return done.status();
    // The last progress line, also where no size was known.
    if (events.progress) events.progress(f.name, done->bytes, done->bytes);
    note(path.string() + ": " + size_text(done->bytes) +
         (done->resumed_from ? ", resumed after " + std::to_string(done->resumed_from) + " bytes" : "") +
         (done->verified ? ", SHA-256 verified" : ", not verified (the hub gave no SHA-256)"));
  }
  return (root / chosen->parts.front().name).string();
}

Result<std::string> resolve_model_path(const std::string& text, const HubOptions& options, const PullEvents& events) {
  std::error_code ec;
  if (fs::exists(text, ec)) return text;
  const auto ref = parse_reference(text);
  if (!ref) return text;
  // A model of the repository is there already: it, or the error saying
  // which of them the tag should name. None matching: pull.
  if (!match_models(group_models(local_files(options.models_dir, ref->repo)), ref->tag).empty())
    return find_local_model(options.models_dir, *ref);
  if (options.offline)
    return Status::error(ref->text() + " is not in " + options.models_dir + " and HF_HUB_OFFLINE is set: run `revis pull " +
                         ref->text() + "` first");
  if (events.note) events.note(ref->text() + " is not in " + options.models_dir + ": pulling it from " + options.endpoint);
  return pull_model(*ref, options, events);
}

}  // namespace revis::hub
