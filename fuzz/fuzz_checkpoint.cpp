// libFuzzer target for the KV checkpoint reader (src/kvstore/checkpoint_file).
// Any byte string, as a file, must either be refused with a non-empty
// message or be read whole: the summary's tokens, then the rows straight
// into runs shaped as the header says (the reader's chunked reads and
// checksum), whose first and last bytes are touched. The file is a memfd,
// reached through /proc/self/fd, so nothing is written to disk.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvstore/checkpoint_file.h"

namespace {

using namespace revis::kvstore;

void require_reason(const revis::Status& s) {
  if (!s.ok() && s.message().empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("fuzz_checkpoint", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) {
    ::close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto summary = read_checkpoint_summary(path);
  require_reason(summary.status());
  if (summary.ok()) {
    const CheckpointHeader& h = summary->header;
    if (summary->tokens.size() != h.n_tokens || summary->file_bytes != size) __builtin_trap();
    // Runs as a session of this shape would offer them, a few positions short
    // of the checkpoint so that the overflow path runs too.
    const size_t positions = h.n_tokens > 2 ? h.n_tokens - 2 : h.n_tokens;
    std::vector<uint8_t> rows(positions * h.shape.bytes_per_token());
    std::vector<revis::KvRun> runs;
    size_t at = 0;
    for (int part = 0; part < 2; ++part)
      for (uint32_t i = 0; i < h.shape.n_layer * h.shape.n_head_kv; ++i) {
        const size_t width = (part == 0 ? h.shape.head_dim_k : h.shape.head_dim_v) * sizeof(uint16_t);
        runs.push_back({rows.data() + at, width, positions});
        at += width * positions;
      }
    std::vector<float> state(h.shape.recurrent_bytes / sizeof(float));
    auto contents = read_checkpoint_into(path, h.model, h.shape, runs, state);
    require_reason(contents.status());
    if (contents.ok()) {
      if (contents->tokens != summary->tokens) __builtin_trap();
      volatile uint8_t sink = rows.empty() ? 0 : rows.front() ^ rows.back();
      (void)sink;
    }
  }
  ::close(fd);
  return 0;
}
