// The files of a hub repository, from the answer to
// GET {endpoint}/api/models/ORG/REPO?blobs=true:
//   {"id": "ORG/REPO", "siblings": [{"rfilename": "m-Q4_K_M.gguf", "size": 1234,
//     "lfs": {"sha256": "<64 hex>", "size": 1234, "pointerSize": 133}}, ...]}
// size and lfs are only there with ?blobs=true, and lfs only for files
// stored in Git LFS (every GGUF in practice).
//
// Contract: a listing without a siblings array, a sibling without a string
// rfilename, or a file name that could leave the repository's directory
// ("..", absolute) is an error naming `origin` and the field.
//
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"

namespace revis::hub {

struct RepoFile {
  std::string name;      // path in the repository ("sub/m-Q4_K_M.gguf")
  uint64_t size = 0;     // 0: not given
  std::string sha256{};  // lowercase hex of the LFS object; empty: not given
};

Result<std::vector<RepoFile>> parse_listing(std::string_view json_text, const std::string& origin);

// Whether `name` may be joined under a directory: relative, no "." or ".."
// component, no empty component, no backslash or NUL.
bool is_safe_relative_path(std::string_view name);

// Whether `name` ends in ".gguf", in any case.
bool is_gguf_name(std::string_view name);

// Whether `text` is 64 hex digits (a SHA-256).
bool is_sha256_hex(std::string_view text);

}  // namespace revis::hub
