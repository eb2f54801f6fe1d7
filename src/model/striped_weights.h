// Keeping a model's matrices in stripes of rows for good.
//
// Where the active kernel backend has a stripe form of a weight type
// (quant.h's stripe_form: AVX-512's Q4_K, Q6_K, Q8_0, Q4_0 and F16, AVX2's
// Q4_K and F16, and AVX2's Q8_0 and Q4_0 where AVX-VNNI is), MatMul
// otherwise rewrites each tile of rows into stripes at every prompt chunk,
// and a generated token multiplies the stored rows with a one-row kernel
// that does several times the instructions per product. Rewritten once at
// load:
//   - a generated token takes the stripe kernel too (dot_one), so decoding
//     is bound by memory rather than by arithmetic;
//   - a token's products are the same bits whether it goes alone or with
//     others, so speculative decoding verifies its drafts four tokens at a
//     time instead of one by one, and a resumed prompt equals a cold one;
//   - prompt chunks skip the rewrite.
// The token embeddings stay as stored (a prompt looks rows up in them); a
// tied output matrix gets a striped copy of its own.
#pragma once

#include <cstdint>
#include <functional>

#include "gguf/huge_page_memory.h"
#include "model/weights.h"
#include "revis/status.h"

namespace revis {

struct StripedWeights {
  HugePageMemory memory;                  // every striped matrix, one after another
  uint64_t matrices = 0;                  // how many were striped (aliases counted once)
};

// Rewrites every matrix of `weights` (but the embeddings) whose type has a
// stripe form on the active backend, and points it at the stripes. Nothing
// for a backend without stripe forms. `replaced` (when set) hears of each
// matrix's stored data as soon as it is rewritten, so that the caller can
// give it back before the next: a model in memory then never holds much
// more than itself, not its stored and striped copies both.
// Layers flagged in layers_elsewhere (those a GPU runs) are left as they are.
Result<StripedWeights> stripe_weights(ModelWeights& weights, const std::function<void(const uint8_t*)>& replaced = {},
                                      const std::vector<bool>& layers_elsewhere = {});

// The same for one matrix (a benchmark's): m points at the stripes
// afterwards, unless its type has no stripe form here.
Result<StripedWeights> stripe_matrix(Matrix& m);

}  // namespace revis
