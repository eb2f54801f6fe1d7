#include "tools/imatrix_run.h"

#include "gguf/gguf.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace revis {

ImatrixRun::ImatrixRun() = default;
ImatrixRun::~ImatrixRun() = default;

Result<std::unique_ptr<ImatrixRun>> ImatrixRun::load(const std::string& path, int n_threads) {
  std::unique_ptr<ImatrixRun> run(new ImatrixRun());
  auto opened = gguf::GgufFile::open(path);
  if (!opened.ok()) return opened.status();
  run->file_ = std::move(*opened);
  auto model = Model::load(run->file_);
  if (!model.ok()) return model.status().with_context(path);
  run->model_ = std::move(*model);
  auto tokenizer = Tokenizer::from_gguf(*run->file_);
  if (!tokenizer.ok()) return tokenizer.status().with_context(path);
  run->tokenizer_ = std::move(*tokenizer);
  run->pool_ = std::make_unique<ThreadPool>(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  return run;
}

std::vector<int32_t> ImatrixRun::tokenize(std::string_view text) const {
  return tokenizer_->encode(text, /*add_bos=*/false, /*parse_special=*/false);
}

int32_t ImatrixRun::chunk_bos() const { return tokenizer_->add_bos_default() ? tokenizer_->bos() : -1; }

void ImatrixRun::collect(Imatrix start) {
  collector_.emplace(*file_, std::move(start));
  model_->set_matmul_observer(&*collector_);
}

Status ImatrixRun::run_chunk(std::span<const int32_t> chunk, int n_ctx) {
  KvCache kv(model_->config(), n_ctx);
  return model_->forward(chunk, 0, kv, *pool_, /*all_logits=*/false, logits_);
}

}  // namespace revis
