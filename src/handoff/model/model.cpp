#include "handoff/model/model.h"

#include <cstring>

#include "handoff/error.h"
#include "handoff/log.h"
#include "handoff/ops/vector_ops.h"

namespace handoff::model {

using tensor::DType;
using tensor::Tensor;

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16)
    fail_input("--dtype must be f32 or bf16, got {}", tensor::dtype_name(options.dtype));
  std::unique_ptr<Model> m(new Model());
  m->config_ = load_config(dir + "/config.json");
  m->dtype_ = options.dtype;
  const ModelConfig& c = m->config_;
  const Checkpoint checkpoint = Checkpoint::open(dir, c);
  const WeightLoader weights(checkpoint, options.dtype);
  // The embedding is a lookup table, not a matmul weight: one row per token is read, so it
  // keeps the checkpoint's precision (f32 stays f32) instead of being rounded to bf16.
  m->embed_ = checkpoint.load("model.embed_tokens.weight", {c.vocab_size, c.hidden_size},
                              options.dtype == DType::kF32 ||
                                      checkpoint.stored_dtype("model.embed_tokens.weight") ==
                                          DType::kF32
                                  ? DType::kF32
                                  : DType::kBF16);
  m->final_norm_ = weights.f32("model.norm.weight", {c.hidden_size});
  const std::string head_name =
      c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  m->lm_head_ = weights.linear(head_name, {c.vocab_size, c.hidden_size});
  m->layers_.reserve(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) m->layers_.emplace_back(c, weights, l, l);
  log::info("loaded {} ({} layers, {}) from {}", family_name(c.family), c.num_hidden_layers,
            tensor::dtype_name(options.dtype), dir);
  return m;
}

size_t Model::active_weight_bytes_per_token() const {
  const ModelConfig& c = config_;
  const size_t elem = tensor::dtype_size(dtype_);
  auto mat = [&](int64_t r, int64_t k) { return static_cast<size_t>(r * k) * elem; };
  const int64_t h = c.num_attention_heads;
  size_t attn = mat(c.q_lora_rank, c.hidden_size) +
                mat(h * c.qk_head_dim(), c.q_lora_rank) +
                mat(c.kv_lora_rank + c.qk_rope_head_dim, c.hidden_size) +
                mat(h * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank) +
                mat(c.hidden_size, h * c.v_head_dim);
  if (c.has_indexer)
    attn += mat(c.index_n_heads * c.index_head_dim, c.q_lora_rank) +
            mat(c.index_head_dim, c.hidden_size) +
            static_cast<size_t>(c.index_n_heads * c.hidden_size) * 4;
  size_t total = mat(c.vocab_size, c.hidden_size);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    total += attn;
    if (c.is_moe_layer(l)) {
      total += static_cast<size_t>(c.n_routed_experts * c.hidden_size) * 4;  // router, f32
      total += 3 * mat(c.moe_intermediate_size * (c.num_experts_per_tok + c.n_shared_experts),
                       c.hidden_size);
    } else {
      total += 3 * mat(c.intermediate_size, c.hidden_size);
    }
  }
  return total;
}

cache::CacheShape Model::cache_shape(int64_t num_blocks, int64_t block_size) const {
  cache::CacheShape s;
  s.num_layers = config_.num_hidden_layers;
  s.kv_lora_rank = config_.kv_lora_rank;
  s.rope_dim = config_.qk_rope_head_dim;
  s.index_dim = config_.has_indexer ? config_.index_head_dim : 0;
  s.block_size = block_size;
  s.num_blocks = num_blocks;
  return s;
}

void Model::build_meta(const std::vector<SequenceChunk>& chunks, int64_t block_size) {
  meta_.sequences.resize(chunks.size());
  meta_.token_seq.clear();
  meta_.token_pos.clear();
  meta_.token_slot.clear();
  for (size_t s = 0; s < chunks.size(); ++s) {
    const SequenceChunk& chunk = chunks[s];
    const auto n = static_cast<int64_t>(chunk.tokens.size());
    if (n == 0) fail("forward: sequence chunk {} has no tokens", s);
    if (chunk.blocks == nullptr) fail("forward: sequence chunk {} has no block table", s);
    const int64_t context = chunk.start_pos + n;
    if (context > chunk.blocks->capacity(block_size))
      fail("forward: chunk {} needs {} cache rows, its block table holds {}", s, context,
           chunk.blocks->capacity(block_size));
    auto& seq = meta_.sequences[s];
    seq.start_pos = chunk.start_pos;
    seq.num_tokens = n;
    seq.first_token = meta_.num_tokens();
    seq.key_slots.resize(static_cast<size_t>(context));
    for (int64_t p = 0; p < context; ++p)
      seq.key_slots[static_cast<size_t>(p)] = chunk.blocks->slot(p, block_size);
    for (int64_t i = 0; i < n; ++i) {
      meta_.token_seq.push_back(static_cast<int32_t>(s));
      meta_.token_pos.push_back(chunk.start_pos + i);
      meta_.token_slot.push_back(seq.key_slots[static_cast<size_t>(chunk.start_pos + i)]);
    }
  }
}

Tensor Model::forward(const std::vector<SequenceChunk>& chunks, cache::PagedCache& cache,
                      StepTrace* trace) {
  const ModelConfig& c = config_;
  build_meta(chunks, cache.shape().block_size);
  const int64_t t_count = meta_.num_tokens();
  const int64_t d = c.hidden_size;
  float* hidden = scratch_.get(0, static_cast<size_t>(t_count * d));
  float* residual = scratch_.get(1, static_cast<size_t>(t_count * d));
  int64_t t = 0;
  for (const SequenceChunk& chunk : chunks)
    for (int32_t token : chunk.tokens) {
      if (token < 0 || token >= c.vocab_size)
        fail_input("token id {} is outside the vocabulary [0, {})", token, c.vocab_size);
      tensor::convert_to_f32(embed_.dtype(),
                             static_cast<const uint8_t*>(embed_.raw()) +
                                 static_cast<size_t>(token * d) * tensor::dtype_size(embed_.dtype()),
                             hidden + t * d, static_cast<size_t>(d));
      ++t;
    }
  if (trace != nullptr) {
    trace->indexer_topk.assign(static_cast<size_t>(c.num_hidden_layers), {});
    trace->experts.assign(static_cast<size_t>(c.num_hidden_layers), {});
  }
  for (size_t l = 0; l < layers_.size(); ++l)
    layers_[l].forward(hidden, residual, l == 0, meta_, cache, trace);

  // Rows that need logits, gathered after the final (residual-fused) norm.
  std::vector<int64_t> rows;
  for (const auto& seq : meta_.sequences) {
    const auto& chunk = chunks[static_cast<size_t>(&seq - meta_.sequences.data())];
    for (int64_t i = chunk.all_logits ? 0 : seq.num_tokens - 1; i < seq.num_tokens; ++i)
      rows.push_back(seq.first_token + i);
  }
  const auto r_count = static_cast<int64_t>(rows.size());
  float* normed = scratch_.get(2, static_cast<size_t>(r_count * d));
  for (int64_t r = 0; r < r_count; ++r) {
    const int64_t row = rows[static_cast<size_t>(r)];
    ops::add_rms_norm(residual + row * d, hidden + row * d, final_norm_.data<float>(),
                      static_cast<float>(c.rms_norm_eps), 1, d, normed + r * d);
  }
  Tensor logits = Tensor::empty({r_count, c.vocab_size}, DType::kF32);
  lm_head_.forward(normed, r_count, logits.data<float>());
  return logits;
}

}  // namespace handoff::model
