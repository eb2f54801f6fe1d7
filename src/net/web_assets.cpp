#include "net/web_assets.h"

#include <map>
#include <string>

namespace revis::node {
namespace {

std::string_view content_type_of(std::string_view path) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},     {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},       {".svg", "image/svg+xml"},
      {".png", "image/png"},                     {".json", "application/json"},
      {".txt", "text/plain; charset=utf-8"},     {".ico", "image/x-icon"},
  };
  for (const auto& [ext, type] : kTypes)
    if (path.ends_with(ext)) return type;
  return "application/octet-stream";
}

// Scripts, styles and images from this node only; the WebSocket back to it
// ('self' covers ws: on the same host and port); no frames, forms or plugins.
constexpr std::string_view kPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace

const WebAsset* find_web_asset(std::string_view path) {
  static const std::map<std::string, WebAsset, std::less<>> assets = [] {
    std::map<std::string, WebAsset, std::less<>> m;
    for (const EmbeddedFile& f : embedded_web_files()) m.emplace("/web" + std::string(f.path), WebAsset{&f, content_type_of(f.path)});
    if (auto it = m.find("/web/index.html"); it != m.end()) m.emplace("/", it->second);
    return m;
  }();
  auto it = assets.find(path);
  return it == assets.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string_view, std::string_view>> web_asset_headers(const WebAsset& asset) {
  return {{"Cache-Control", "no-cache"},
          {"ETag", asset.file->etag},
          {"Content-Security-Policy", kPolicy},
          {"X-Content-Type-Options", "nosniff"},
          {"Referrer-Policy", "no-referrer"},
          {"X-Frame-Options", "DENY"}};
}

}  // namespace revis::node
