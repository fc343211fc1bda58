#pragma once
// The DSA lightning indexer (MODEL_SPEC §2.6): scores every causal key of a token's sequence
// with Σ_h w_h · ReLU(q_h · k_j) and keeps the top index_topk keys for the main attention.
#include <cstdint>
#include <string>
#include <vector>

#include "handoff/cache/paged_cache.h"
#include "handoff/model/batch.h"
#include "handoff/model/config.h"
#include "handoff/model/rope.h"
#include "handoff/model/scratch.h"
#include "handoff/model/weight_loader.h"
#include "handoff/ops/linear.h"

namespace handoff::model {

class Indexer {
 public:
  Indexer(const ModelConfig& config, const WeightLoader& weights, const std::string& prefix,
          Scratch& scratch);

  // The indexer's products over `rows` tokens, for the attention to run in its own parallel
  // regions (ops::LinearWeight::forward_group): those of x, the attention-normed input [T, D]
  // (the key and the head weights), beside its q_a / kv_a product; that of qr, the normalised
  // q latent [T, q_lora_rank] (the queries), beside its q_b one. forward() reads their results.
  // Steps whose every token keeps all its causal keys (selects(meta) false: fewer than
  // index_topk) need only the key, which the cache keeps for later steps.
  void add_products(const StepMeta& meta, const float* x, const float* qr,
                    std::vector<ops::LinearProduct>& of_x, std::vector<ops::LinearProduct>& of_qr);
  // Whether a token attending `keys` cache positions (its own included) selects among them: more
  // than index_topk. Otherwise it keeps every key, and its query products are not needed.
  static bool selects(int64_t keys, int64_t topk) { return keys > topk; }
  // Whether some token of the step selects.
  bool selects(const StepMeta& meta) const;
  // After those products: writes each token's index key to the cache, then fills selected[t]
  // with the sorted key positions token t attends to; selected[t] stays empty when every
  // causal key is kept.
  void forward(const StepMeta& meta, const Rope& rope, cache::PagedCache& cache,
               int64_t cache_layer, std::vector<std::vector<int32_t>>& selected);

 private:
  // Scores rows [t0, t1) (one sequence) against all their causal keys and selects each row's
  // top-k. Keys go through in tiles of kTileKeys, the parallel work items.
  void select_group(int64_t t0, int64_t t1, const float* q, const float* w, const StepMeta& meta,
                    cache::PagedCache& cache, int64_t cache_layer,
                    std::vector<std::vector<int32_t>>& selected);

  // A group's scores (rows × keys floats) are the only per-context scratch: 32 rows keep it at
  // 16 MiB for a 128K context while a 512-token chunk still gathers each key only 16 times.
  static constexpr int64_t kGroupRows = 32;
  static constexpr int64_t kTileKeys = 128;
  int64_t heads_, head_dim_, rope_dim_, topk_;
  bool interleaved_;
  float scale_;
  ops::LinearWeight wq_b_, wk_, weights_proj_;
  tensor::Tensor k_norm_weight_, k_norm_bias_;
  Scratch& scratch_;  // shared with every layer's indexer
};

}  // namespace handoff::model
