// Downloads one file with resume and SHA-256 verification.
//
// Contract:
//  - The bytes go to PATH.part; PATH appears (by rename) only once all of
//    them are there and their SHA-256 matches the expected one, so a file
//    under its final name is always whole and verified.
//  - An existing PATH.part is resumed: its bytes are hashed first, then
//    the rest is asked for with "Range: bytes=N-". A server that answers
//    200 instead of 206 sends the whole file again, and the part restarts.
//    A connection lost midway is resumed the same way within the call, up
//    to 3 times in a row without new bytes. A part that got no byte before
//    the call failed (401, 404, no network) is removed.
//  - The expected SHA-256 is the hub's X-Linked-Etag (the LFS object's
//    sha256, on the resolve answer or a redirect before it) and the
//    listing's lfs.sha256; when both are given they must agree. A mismatch
//    deletes PATH.part and is an error naming both digests. With neither,
//    the file is kept unverified and DownloadInfo::verified says so.
//  - Before writing, the free space of PATH's file system is checked
//    against the bytes still to come; too little, or ENOSPC while writing,
//    is an error saying how many bytes were needed (or, when the server
//    gave no size, how many fitted) and how many were free (the part is
//    kept, to resume once there is room).
//
// Thread-safety: plain functions; two calls must not share a PATH.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "revis/status.h"

namespace revis::hub {

struct DownloadRequest {
  std::string url;
  std::string bearer;           // HF_TOKEN; empty: none
  std::string path;             // final name
  std::string expected_sha256;  // from the listing; empty: none
  // (bytes there, bytes in all; 0: not known yet), after each chunk.
  std::function<void(uint64_t done, uint64_t total)> progress;
  int timeout_ms = 30000;
};

struct DownloadInfo {
  uint64_t bytes = 0;
  uint64_t resumed_from = 0;  // bytes of PATH.part that were already there
  std::string sha256{};
  bool verified = false;
};

Result<DownloadInfo> download_file(const DownloadRequest& request);

// The name a download uses until it is verified.
std::string partial_path(const std::string& path);

}  // namespace revis::hub
