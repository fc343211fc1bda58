#pragma once
// One rank's part of the causal LM (MODEL_SPEC §4): the layers of its pipeline stage, built from
// the parallel plan for its tensor-parallel rank; the vocab-parallel embedding on the first
// stage, the final norm and vocab-parallel lm_head on the last. forward() runs the rank's part
// of a step: embed or receive, its layers, then hand off to the next stage or produce logits.
#include <memory>
#include <string>
#include <vector>

#include "handoff/cache/paged_cache.h"
#include "handoff/comm/communicator.h"
#include "handoff/model/batch.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/config.h"
#include "handoff/model/decoder_layer.h"
#include "handoff/ops/linear.h"
#include "handoff/parallel/plan.h"
#include "handoff/tensor/tensor.h"

namespace handoff::model {

struct LoadOptions {
  tensor::DType dtype = tensor::DType::kBF16;  // weights of linear layers; activations are f32
  parallel::ParallelOptions parallel;          // default: one rank
  comm::Communicator* comm = nullptr;          // this rank's; required when tp * pp > 1
  // Every linear computes each row alone, so a request's result does not depend on its batch
  // (the serving engine sets it at f32; see docs/architecture.md, "Batch invariance").
  bool batch_invariant = false;
  // Scan every weight for NaN / Inf while loading (a bandwidth-bound pass; --no-check-weights).
  bool check_weights = true;
  // Storage of the cache rows (f32 or bf16): the latent c_kv + k_pe, and the indexer's key.
  tensor::DType latent_cache_dtype = tensor::DType::kF32;
  tensor::DType index_cache_dtype = tensor::DType::kF32;
  // --quantize fp8: quantise the matrices a published FP8 checkpoint has in FP8 (128 x 128
  // blocks) while loading a bf16/f32 checkpoint; InputError if it is already FP8.
  bool quantize_fp8 = false;
  // --activations: how bf16 / FP8 weights take their inputs (ops::ActivationPrecision): exact,
  // or rounded to bf16 in prefill-sized products; f32 runs are always exact.
  ops::ActivationPrecision activations = ops::ActivationPrecision::kExact;
  // A sequence's prompt chunk of at least this many tokens (of those that attend to every
  // earlier key) attends per head: keys expanded through kv_b, 160 columns a key and head on
  // bench-moe against the absorbed form's 544 (MlaAttention). Not under batch_invariant.
  int64_t per_head_prefill_min_tokens = 128;
};

class Model {
 public:
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& options);

  const ModelConfig& config() const { return config_; }
  const parallel::Plan& plan() const { return plan_; }
  tensor::DType dtype() const { return dtype_; }
  // Whether the attention / MLP / expert matrices are held in FP8 (stored so, or --quantize).
  bool fp8_weights() const { return fp8_weights_; }
  comm::Communicator* comm() const { return comm_; }
  int stage() const { return stage_; }
  // This rank's world rank (0 for a model of one rank).
  int world_rank() const;
  // The token the last stage sampled, on every rank: the last stage's first tp rank broadcasts
  // it to the world (counted under parallel::sample_scope()); one rank returns `token`.
  int32_t share_sampled_token(int32_t token);
  bool is_first_stage() const { return stage_ == 0; }
  bool is_last_stage() const { return stage_ + 1 == plan_.options.pp; }
  // Weight bytes a decode token reads in the whole model (all ranks): attention, dense layers,
  // shared and top-k experts, lm_head (the embedding row is negligible), for a token attending
  // `keys` cache positions (its own included): at most index_topk of them, the indexer's query
  // weights (wq_b, weights_proj) are not read, since every key is selected anyway.
  size_t active_weight_bytes_per_token(int64_t keys) const;

  // A cache for this stage's layers.
  cache::CacheShape cache_shape(int64_t num_blocks, int64_t block_size) const;

  // Runs this rank's part of one step over `chunks`, writing their tokens into `cache`. On the
  // last stage returns f32 logits [rows, vocab]: every token of an all_logits chunk, else its
  // last token, in chunk order; elsewhere an undefined tensor.
  tensor::Tensor forward(const std::vector<SequenceChunk>& chunks, cache::PagedCache& cache,
                         StepTrace* trace = nullptr);

  // The profiling pass: one dummy step of `max_tokens` tokens through a throwaway cache, so
  // every buffer reaches its peak size before serving and the step loop does not allocate.
  // Every rank of the run must call it together. Communication counts are left as they were.
  void profile_run(int64_t max_tokens);
  // Rows of the stage hand-off in the last step (sent to the next stage / received from the
  // previous one; 0 where there is none). Both follow pp_intermediate_token_count.
  int64_t last_rows_sent() const { return last_rows_sent_; }
  int64_t last_rows_received() const { return last_rows_received_; }

 private:
  Model() = default;
  void build_meta(const std::vector<SequenceChunk>& chunks, int64_t block_size);
  void embed(const std::vector<SequenceChunk>& chunks, float* hidden);
  void receive(Activations& io, int64_t n);
  void hand_off(Activations& io, int64_t n);
  tensor::Tensor logits(const std::vector<SequenceChunk>& chunks, Activations& io);

  ModelConfig config_;
  parallel::Plan plan_;
  comm::Communicator* comm_ = nullptr;
  int stage_ = 0;
  int tp_rank_ = 0;
  tensor::DType dtype_ = tensor::DType::kBF16;
  bool fp8_weights_ = false;
  // Bytes per weight of the router and the indexer's weights_proj, as
  // WeightLoader::linear_fp32_math holds them.
  size_t router_elem_ = 4, index_weights_elem_ = 4;
  // The FP8 block grid the matrices are packed on (the checkpoint's, or 128 x 128 when quantised
  // at load): a packed matrix holds an f32 scale per row and block_cols columns.
  int64_t fp8_block_rows_ = 128, fp8_block_cols_ = 128;
  tensor::DType latent_cache_dtype_ = tensor::DType::kF32, index_cache_dtype_ = tensor::DType::kF32;
  int64_t vocab_begin_ = 0, vocab_end_ = 0;  // this rank's rows of embedding and lm_head
  tensor::Tensor embed_;
  tensor::Tensor final_norm_;
  ops::LinearWeight lm_head_;
  LayerScratch layer_scratch_;  // before layers_, which refer to it
  std::vector<DecoderLayer> layers_;
  StepMeta meta_;
  std::vector<int64_t> logit_rows_;  // rows of the step that need logits
  Scratch scratch_{8};               // staggered from layer_scratch_ (scratch.h)
  int64_t last_rows_sent_ = 0, last_rows_received_ = 0;
};

}  // namespace handoff::model
