// Running a model over chunks of a text to collect an importance matrix
// (`revis imatrix`): the model and its vocabulary read from one file
// without an engine, and every chunk evaluated from an empty context with an
// ImatrixCollector watching the matrix products.
//
// Thread-safety: one thread at a time; the model runs on the run's own
// thread pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"
#include "tools/imatrix_collector.h"
#include "tools/imatrix_file.h"

namespace revis {

class Model;
class ThreadPool;
class Tokenizer;

class ImatrixRun {
 public:
  // n_threads 0: the physical cores. An error names the file.
  static Result<std::unique_ptr<ImatrixRun>> load(const std::string& path, int n_threads);
  ~ImatrixRun();

  // The text as plain tokens: no BOS, control-token texts left as text.
  std::vector<int32_t> tokenize(std::string_view text) const;
  // The id each chunk starts with where the model adds BOS; -1 otherwise.
  int32_t chunk_bos() const;

  // Collects from now on, adding to the sums of `start` (ImatrixCollector).
  void collect(Imatrix start);
  // Evaluates one chunk from an empty context of n_ctx positions; the
  // model's error, if any. The collector's own: collector().status().
  Status run_chunk(std::span<const int32_t> chunk, int n_ctx);
  // After collect().
  ImatrixCollector& collector() { return *collector_; }

 private:
  ImatrixRun();
  std::shared_ptr<const gguf::GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::optional<ImatrixCollector> collector_;
  std::vector<float> logits_;
};

}  // namespace revis
