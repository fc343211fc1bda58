#pragma once
// Multi-head latent attention with the DSA indexer (MODEL_SPEC §2.2-2.6). Decode (and any row
// the per-head form does not take) runs the absorbed form over the latent cache: q_nope is
// mapped into the latent space through W_UK, scores read the cached c_kv and k_pe, and the
// latent output goes back out through W_UV; when the indexer selected keys, only those rows are
// gathered. A prompt chunk's rows that attend to every earlier key run the per-head form, as
// the reference's naive mode does: the keys are expanded through W_UK and W_UV once per chunk,
// and each score and value sum runs over qk_nope + rope and v_head columns instead of kv_rank +
// rope and kv_rank (160 against 544 on bench-moe, 640 against 2176 at GLM-5's widths).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "handoff/cache/paged_cache.h"
#include "handoff/model/batch.h"
#include "handoff/model/config.h"
#include "handoff/model/indexer.h"
#include "handoff/model/rope.h"
#include "handoff/model/scratch.h"
#include "handoff/model/weight_loader.h"
#include "handoff/ops/linear.h"

namespace handoff::model {

// The attention heads this rank computes, [begin, begin + count).
struct HeadRange {
  int64_t begin = 0;
  int64_t count = 0;
};

class MlaAttention {
 public:
  MlaAttention(const ModelConfig& config, const WeightLoader& weights, int64_t layer,
               HeadRange heads, LayerScratch& scratch);

  // Whether W_UK[h]ᵀ of an FP8 kv_b_proj is held FP8: when head h's rows start at row `row0`
  // of it, its qk_nope columns are padded to whole (transposed) blocks from there, and it stays
  // FP8 where that row is smaller than in the compute dtype (`dense_elem` bytes a weight).
  static bool keeps_uk_t_fp8(int64_t row0, int64_t nope, int64_t block, int64_t dense_elem);

  // Whether any prompt row can take the per-head form, which needs `min_tokens` leading rows of
  // a sequence that attend to every earlier key (0: the form is off). On a DSA model only
  // positions below index_topk do, so with index_topk under min_tokens W_UK[h] is not held again.
  static bool uses_per_head_form(const ModelConfig& config, int64_t min_tokens);

  // x: the normed input [T, D]. out [T, D]: o_proj over this rank's heads (a partial sum when
  // heads are split across ranks; the caller owns the reduction).
  void forward(const float* x, const StepMeta& meta, cache::PagedCache& cache, int64_t cache_layer,
               StepTrace* trace, int64_t trace_layer, float* out);

 private:
  // Sparse (or, below index_topk keys, dense causal) attention over the latent cache: per
  // token, its keys are gathered a tile at a time into contiguous rows and scored for all heads
  // by matrix products, with an online softmax across tiles.
  // Leaves each work item's running max, sum and weighted latent per head in run_max_,
  // run_sum_ and run_acc_; merge() combines a token's items.
  void attend(const StepMeta& meta, cache::PagedCache& cache, int64_t cache_layer, const float* q,
              const float* q_abs);
  // The first n rows of `seq` in the step, each attending to every earlier key, in the
  // per-head form: keys expanded kExpandKeys at a time, then per (head, block of kQueryBlock
  // rows) an online softmax over 64-key tiles; o's rows of this rank's heads are written.
  void attend_per_head(const StepMeta::Sequence& seq, int64_t n, cache::PagedCache& cache,
                       int64_t cache_layer, const float* q, float* o);
  // latent[t, h] from token t's work items, merged in segment order.
  void merge(int64_t t, int64_t h, float* latent) const;
  // Keys token row t attends to: its selection, or every causal key.
  int64_t key_count(const StepMeta& meta, int64_t t) const;
  // Work items of token row t in the absorbed form: its keys in segments of segment_keys.
  int64_t segments(const StepMeta& meta, int64_t t) const;
  // run_max_, run_sum_ and run_acc_ (scratch 7-9) for `items` work items.
  void item_buffers(int64_t items);

  // A tile's gathered rows and their transpose stay in L2 (2 × 64 × 576 floats at GLM-5's
  // width).
  static constexpr int64_t kTileKeys = 64;
  // A token's keys split into up to kMaxSegments work items of whole tiles, at most
  // kMaxSegmentKeys each: a decode token of 577 keys is 5 items (4 of 128 keys, one of 65), so
  // two threads share it (as 512-key segments, 512 + 65 keys, one thread did most of it), while a
  // prefill chunk's per-item accumulators stay bounded (kMaxSegments per token up to 4,096 keys).
  static constexpr int64_t kMaxSegments = 8;
  static constexpr int64_t kMaxSegmentKeys = 512;
  // Keys per work item of a token with `keys` keys: a function of the token's own key count,
  // so results do not depend on the batch or the thread count.
  static int64_t segment_keys(int64_t keys);
  // The per-head form's query rows per work item, and keys expanded at a time (their K and V
  // for all of this rank's heads: 256 × 16 × 128 floats, 2 MiB, on bench-moe).
  static constexpr int64_t kQueryBlock = 64;
  static constexpr int64_t kExpandKeys = 256;
  // How far ahead of the gather a key row is prefetched (8 rows of 576 B at bench-moe's width).
  static constexpr int64_t kPrefetchKeys = 8;

  int64_t hidden_, heads_, nope_, rope_dim_, v_dim_, kv_rank_, q_rank_;
  float eps_, softmax_scale_;
  bool interleaved_;
  Rope rope_;
  ops::LinearWeight qkv_a_, q_b_, o_proj_;  // qkv_a_: [q_a_proj; kv_a_proj_with_mqa]
  tensor::Tensor q_a_norm_, kv_a_norm_;
  std::vector<ops::LinearProduct> of_x_, of_qr_;  // a step's products of x and of qr
  std::vector<ops::LinearWeight> w_uk_t_;         // per head: [kv_rank, nope] = W_UK[h]ᵀ
  std::vector<ops::LinearWeight> w_uv_;           // per head: [v_dim, kv_rank]
  std::vector<ops::LinearWeight> w_uk_;           // per head: [nope, kv_rank], per-head form only
  int64_t per_head_min_tokens_ = 0;               // 0: the per-head form is off
  std::vector<int64_t> per_head_count_;           // this step's per-head rows of each sequence
  std::vector<ops::LinearProduct> expand_;        // a key chunk's W_UK and W_UV products
  std::unique_ptr<Indexer> indexer_;
  std::vector<std::vector<int32_t>> selected_;
  std::vector<int64_t> item_token_, token_first_item_;  // attend's work items, reused per step
  float *run_max_ = nullptr, *run_sum_ = nullptr, *run_acc_ = nullptr;  // this step's, scratch
  Scratch& scratch_;  // the model's, shared with every layer
};

}  // namespace handoff::model
