// The dashboard (web/): a single-page app every node serves at "/" and
// "/web/...". Its files are compiled into the binary (cmake/embed_web.cmake
// writes them into a generated source), so an installed `revis` needs
// nothing beside it, and the page works offline: no CDN, every script a
// module of its own, under a Content-Security-Policy that allows nothing
// but this node (no inline script or style, no other host).
//
// The files are static and hold no data: the server answers them without
// the token; the page asks the user for it and sends it with its WebSocket
// (net/request_guard.h, token_from_subprotocols).
//
// Thread-safety: immutable data; every function may be called from any
// thread.
#pragma once

#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace revis::node {

struct EmbeddedFile {
  std::string_view path;  // "/index.html", "/js/app.js", ... (relative to web/)
  std::string_view body;
  std::string_view etag;  // quoted, from the file's SHA-256
};

// Every file of web/, sorted by path (the generated source).
std::span<const EmbeddedFile> embedded_web_files();

struct WebAsset {
  const EmbeddedFile* file;
  std::string_view content_type;
};

// The asset a GET of `path` (without its query) serves: "/" is
// /index.html, "/web/X" is /X. Null for any other path, so that the API's
// 404s stay as they are.
const WebAsset* find_web_asset(std::string_view path);

// The response headers of an asset besides Content-Type: caching
// (revalidated by ETag; the file names carry no version) and the security
// policy.
std::vector<std::pair<std::string_view, std::string_view>> web_asset_headers(const WebAsset& asset);

}  // namespace revis::node
