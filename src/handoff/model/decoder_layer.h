#pragma once
// One decoder layer's shell: input norm (fused with the residual add), MLA + indexer, residual,
// post-attention norm, dense MLP or MoE — and, from the layer's plan, its parallel behaviour:
// which heads, experts and FFN columns this rank holds, whether o_proj reduces, and whether
// hidden and residual stay token-sharded (FlashComm1). Activations cross layers as
// {hidden, residual} with an explicit layout tag.
#include <cstdint>
#include <memory>

#include "handoff/cache/paged_cache.h"
#include "handoff/comm/communicator.h"
#include "handoff/model/batch.h"
#include "handoff/model/config.h"
#include "handoff/model/mla_attention.h"
#include "handoff/model/mlp.h"
#include "handoff/model/moe.h"
#include "handoff/model/scratch.h"
#include "handoff/model/weight_loader.h"
#include "handoff/parallel/plan.h"

namespace handoff::model {

// The layer I/O. hidden and residual have room for tp * ceil(n / tp) rows; `layout` says which
// rows are held: all n (full) or this rank's ceil(n / tp) (shard, zero-padded).
struct Activations {
  float* hidden = nullptr;
  float* residual = nullptr;
  parallel::Layout layout = parallel::Layout::kFull;
};

// This rank's place in the tensor-parallel group.
struct TensorParallelRank {
  int rank = 0;
  int size = 1;
  comm::Communicator* comm = nullptr;  // required when size > 1
};

class DecoderLayer {
 public:
  DecoderLayer(const ModelConfig& config, const WeightLoader& weights,
               const parallel::LayerPlan& plan, TensorParallelRank tp, int64_t cache_layer,
               LayerScratch& scratch);

  const parallel::LayerPlan& plan() const { return plan_; }
  void forward(Activations& io, const StepMeta& meta, cache::PagedCache& cache, StepTrace* trace);

 private:
  void forward_sequence_parallel(Activations& io, const StepMeta& meta, cache::PagedCache& cache,
                                 StepTrace* trace);
  void forward_full(Activations& io, const StepMeta& meta, cache::PagedCache& cache,
                    StepTrace* trace);
  // Experts over the all-gathered shards: x_shard [s, D] is routed here, gathered with its
  // routing, and out [tp * s, D] receives this rank's partial sums for all rows.
  void moe_expert_parallel(const float* x_shard, int64_t n, float* out, StepTrace* trace);
  void record_experts(const Routing& routing, int64_t rows, StepTrace* trace) const;

  parallel::LayerPlan plan_;
  TensorParallelRank tp_;
  int64_t cache_layer_, hidden_size_, top_k_ = 0;
  float eps_;
  tensor::Tensor input_norm_, post_norm_;
  std::unique_ptr<MlaAttention> attention_;
  std::unique_ptr<Mlp> mlp_;
  std::unique_ptr<Moe> moe_;
  Routing routing_, routing_all_;
  Scratch& scratch_;  // the model's, shared with every layer
};

}  // namespace handoff::model
