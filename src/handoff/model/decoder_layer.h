#pragma once
// One decoder layer's shell: input norm (fused with the residual add), MLA + indexer, residual,
// post-attention norm, dense MLP or MoE. Activations cross layers as {hidden, residual}: the
// layer adds the incoming hidden into the residual before its first norm, as vLLM does, so a
// stage boundary carries exactly these two tensors.
#include <cstdint>
#include <memory>

#include "handoff/cache/paged_cache.h"
#include "handoff/model/batch.h"
#include "handoff/model/config.h"
#include "handoff/model/mla_attention.h"
#include "handoff/model/mlp.h"
#include "handoff/model/moe.h"
#include "handoff/model/scratch.h"
#include "handoff/model/weight_loader.h"

namespace handoff::model {

class DecoderLayer {
 public:
  DecoderLayer(const ModelConfig& config, const WeightLoader& weights, int64_t layer,
               int64_t cache_layer);

  int64_t index() const { return layer_; }
  bool is_moe() const { return moe_ != nullptr; }
  // hidden, residual: [T, D]. On the first layer pass first = true (residual is set from
  // hidden). On return hidden holds the FFN output and residual the stream before it.
  void forward(float* hidden, float* residual, bool first, const StepMeta& meta,
               cache::PagedCache& cache, StepTrace* trace);

 private:
  int64_t layer_, cache_layer_, hidden_size_;
  float eps_;
  tensor::Tensor input_norm_, post_norm_;
  std::unique_ptr<MlaAttention> attention_;
  std::unique_ptr<Mlp> mlp_;
  std::unique_ptr<Moe> moe_;
  Routing routing_;
  Scratch scratch_;
};

}  // namespace handoff::model
