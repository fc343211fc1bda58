#pragma once
// The HF checkpoint tensor list (MODEL_SPEC §6) of a config: names, shapes and what kind of
// weight each one is. The one place that knows the layout, shared by the model maker, the
// loader tests and parameter counting.
#include <cstdint>
#include <string>
#include <vector>

#include "handoff/model/config.h"
#include "handoff/tensor/tensor.h"

namespace handoff::model {

enum class TensorKind {
  kMatrix,      // linear weight [out, in]; FP8-quantisable
  kEmbedding,   // model.embed_tokens.weight
  kNorm,        // RMSNorm / LayerNorm weight
  kNormBias,    // LayerNorm bias (indexer k_norm)
  kRouter,      // mlp.gate.weight (never quantised)
  kRouterBias,  // mlp.gate.e_score_correction_bias (kept in F32)
};

struct TensorSpec {
  std::string name;
  tensor::Shape shape;
  TensorKind kind = TensorKind::kMatrix;
  int64_t layer = -1;   // -1 for top-level tensors
  int64_t expert = -1;  // routed expert index, -1 otherwise
};

// Every tensor of the main model (no MTP layers), in checkpoint order.
std::vector<TensorSpec> checkpoint_tensors(const ModelConfig& config);

struct ParamCounts {
  int64_t total = 0;
  // Parameters touched per token: everything but the embedding table (a lookup, not a matmul)
  // and the routed experts that are not selected (num_experts_per_tok of n_routed_experts).
  int64_t active_per_token = 0;
};
ParamCounts count_params(const ModelConfig& config);

}  // namespace handoff::model
