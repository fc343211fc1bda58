#pragma once
// The whole causal LM: embedding, decoder layers, final norm, lm_head (MODEL_SPEC §4).
#include <memory>
#include <string>
#include <vector>

#include "handoff/cache/paged_cache.h"
#include "handoff/model/batch.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/config.h"
#include "handoff/model/decoder_layer.h"
#include "handoff/ops/linear.h"
#include "handoff/tensor/tensor.h"

namespace handoff::model {

struct LoadOptions {
  tensor::DType dtype = tensor::DType::kBF16;  // weights of linear layers; activations are f32
};

class Model {
 public:
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& options);

  const ModelConfig& config() const { return config_; }
  tensor::DType dtype() const { return dtype_; }
  // Weight bytes a decode token reads: attention, dense layers, shared and top-k experts,
  // lm_head (the embedding row is negligible).
  size_t active_weight_bytes_per_token() const;

  cache::CacheShape cache_shape(int64_t num_blocks, int64_t block_size) const;

  // Runs one step over `chunks`, writing their tokens into `cache`. Returns f32 logits
  // [rows, vocab]: every token of an all_logits chunk, else its last token, in chunk order.
  tensor::Tensor forward(const std::vector<SequenceChunk>& chunks, cache::PagedCache& cache,
                         StepTrace* trace = nullptr);

 private:
  Model() = default;
  void build_meta(const std::vector<SequenceChunk>& chunks, int64_t block_size);

  ModelConfig config_;
  tensor::DType dtype_ = tensor::DType::kBF16;
  tensor::Tensor embed_;
  tensor::Tensor final_norm_;
  ops::LinearWeight lm_head_;
  std::vector<DecoderLayer> layers_;
  StepMeta meta_;
  Scratch scratch_;
};

}  // namespace handoff::model
