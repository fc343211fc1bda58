#include "handoff/model/model.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "handoff/error.h"
#include "handoff/log.h"
#include "handoff/model/indexer.h"
#include "handoff/ops/vector_ops.h"
#include "handoff/parallel/scopes.h"
#include "handoff/parallel/token_layout.h"

namespace handoff::model {

using tensor::DType;
using tensor::Tensor;

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16)
    fail_input("--dtype must be f32 or bf16, got {}", tensor::dtype_name(options.dtype));
  const auto started = std::chrono::steady_clock::now();
  std::unique_ptr<Model> m(new Model());
  m->config_ = load_config(dir + "/config.json");
  const ModelConfig& c = m->config_;
  // Plan before construct: every layer below is built from this plan and never changed.
  m->plan_ = parallel::make_plan(c, options.parallel);
  const int tp = options.parallel.tp;
  if (tp * options.parallel.pp > 1 && options.comm == nullptr)
    fail("Model::load: tp * pp > 1 needs a communicator");
  m->comm_ = options.comm;
  m->stage_ = options.comm ? options.comm->topology().pp_rank() : 0;
  m->tp_rank_ = options.comm ? options.comm->topology().tp_rank() : 0;
  m->dtype_ = options.dtype;
  m->latent_cache_dtype_ = options.latent_cache_dtype;
  m->index_cache_dtype_ = options.index_cache_dtype;
  const Checkpoint checkpoint = Checkpoint::open(dir, c, options.quantize_fp8);
  // One progress line for a one-rank load; ranks of a parallel run each load a part.
  std::optional<LoadProgress> progress;
  if (tp * options.parallel.pp == 1) progress.emplace("loading weights", checkpoint.total_bytes());
  WeightLoaderOptions wo;
  wo.progress = progress ? &*progress : nullptr;
  wo.row_independent = options.batch_invariant;
  wo.activations =
      options.dtype == DType::kF32 ? ops::ActivationPrecision::kExact : options.activations;
  wo.check_finite = options.check_weights;
  wo.per_head_prefill_min_tokens =
      options.batch_invariant ? 0 : std::max<int64_t>(0, options.per_head_prefill_min_tokens);
  const WeightLoader weights(checkpoint, options.dtype, wo);
  const int64_t vocab_part = (c.vocab_size + tp - 1) / tp;
  m->vocab_begin_ = std::min(c.vocab_size, m->tp_rank_ * vocab_part);
  m->vocab_end_ = std::min(c.vocab_size, m->vocab_begin_ + vocab_part);
  if (m->is_first_stage()) {
    // The embedding is a lookup table, not a matmul weight: one row per token is read, so it
    // keeps the checkpoint's precision (f32 stays f32) instead of being rounded to bf16.
    const std::string name = "model.embed_tokens.weight";
    const DType embed_dtype =
        options.dtype == DType::kF32 || checkpoint.stored_dtype(name) == DType::kF32 ? DType::kF32
                                                                                     : DType::kBF16;
    // This rank's rows, resident (the memory plan counts them as held). A view of the mapping
    // kept only looked-up rows resident, but after release_pages each token not seen before
    // was a page fault inside the step: 70-90 us of an 8 ms decode step on the Zen 5 guest,
    // whose faults are slow (docs/performance.md). A converted slice is already a copy of its
    // own (on huge pages when large); only a view is copied out.
    m->embed_ = weights.load_slice(name, {c.vocab_size, c.hidden_size}, embed_dtype, 0,
                                   m->vocab_begin_, m->vocab_end_);
    if (m->embed_.is_view_of_file()) m->embed_ = m->embed_.contiguous();
    checkpoint.release_pages();
  }
  if (m->is_last_stage()) {
    m->final_norm_ = weights.f32("model.norm.weight", {c.hidden_size});
    const std::string head_name =
        c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    m->lm_head_ = weights.make_linear(weights.matrix_slice(head_name, {c.vocab_size, c.hidden_size},
                                                           0, m->vocab_begin_, m->vocab_end_),
                                      options.dtype);
    checkpoint.release_pages();
  }
  const parallel::StagePlan& stage = m->plan_.stages[static_cast<size_t>(m->stage_)];
  m->layers_.reserve(stage.layers.size());
  for (const parallel::LayerPlan& lp : stage.layers) {
    m->layers_.emplace_back(c, weights, lp, TensorParallelRank{m->tp_rank_, tp, options.comm},
                            lp.index - stage.first_layer, m->layer_scratch_);
    checkpoint.release_pages();  // the layer's slices are copied out
  }
  if (progress) progress->finish();
  // What this rank holds: its linear weights (its heads, experts, FFN and vocab slices of its
  // stage's layers) and its embedding rows; norms and biases are a few KiB.
  m->fp8_weights_ = weights.holds_fp8();
  m->fp8_block_rows_ = weights.checkpoint().block_rows();
  m->fp8_block_cols_ = weights.checkpoint().block_cols();
  // Every layer's router (weights_proj) is stored alike: the first one's says how all are held.
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.is_moe_layer(l)) {
      m->router_elem_ = tensor::dtype_size(
          weights.fp32_math_dtype(fmt::format("model.layers.{}.mlp.gate.weight", l)));
      break;
    }
  if (c.has_indexer)
    m->index_weights_elem_ = tensor::dtype_size(
        weights.fp32_math_dtype("model.layers.0.self_attn.indexer.weights_proj.weight"));
  const size_t held = weights.linear_bytes() + (m->embed_.defined() ? m->embed_.nbytes() : 0);
  log::info(
      "loaded {} ({} layers, {}{}{}) from {} in {:.2f} s; stage {} layers [{}, {}), tp rank {} "
      "of {}; rank {} holds {:.1f} MiB of weights",
      family_name(c.family), c.num_hidden_layers, tensor::dtype_name(options.dtype),
      m->fp8_weights_ ? options.quantize_fp8 ? ", matrices quantised to fp8" : ", fp8 matrices"
                      : "",
      wo.activations == ops::ActivationPrecision::kBf16 ? ", bf16 activations" : "", dir,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), m->stage_,
      stage.first_layer, stage.end_layer, m->tp_rank_, tp, m->world_rank(),
      static_cast<double>(held) / (1 << 20));
  return m;
}

size_t Model::active_weight_bytes_per_token(int64_t keys) const {
  const ModelConfig& c = config_;
  const size_t elem = tensor::dtype_size(dtype_);
  // FP8 matrices: 1 byte per weight and an f32 scale per row and block of columns (as packed).
  const int64_t bc = fp8_block_cols_;
  auto mat = [&](int64_t r, int64_t k) {
    if (fp8_weights_) return static_cast<size_t>(r * k + r * ((k + bc - 1) / bc) * 4);
    return static_cast<size_t>(r * k) * elem;
  };
  auto dense = [&](int64_t r, int64_t k) { return static_cast<size_t>(r * k) * elem; };
  const int64_t h = c.num_attention_heads;
  size_t attn = mat(c.q_lora_rank, c.hidden_size) + mat(h * c.qk_head_dim(), c.q_lora_rank) +
                mat(c.kv_lora_rank + c.qk_rope_head_dim, c.hidden_size) +
                mat(c.hidden_size, h * c.v_head_dim);
  // kv_b per head: W_UV[h], and W_UK[h]ᵀ, FP8 (padded) or dense as MlaAttention holds it.
  const int64_t head_rows = c.qk_nope_head_dim + c.v_head_dim;
  for (int64_t i = 0; i < h; ++i) {
    attn += mat(c.v_head_dim, c.kv_lora_rank);
    const int64_t nope = c.qk_nope_head_dim;
    if (fp8_weights_ && MlaAttention::keeps_uk_t_fp8(i * head_rows, nope, fp8_block_rows_,
                                                     static_cast<int64_t>(elem)))
      attn += static_cast<size_t>(c.kv_lora_rank * ops::LinearWeight::fp8_packed_row_bytes(
                                                       i * head_rows, nope, fp8_block_rows_));
    else
      attn += dense(c.kv_lora_rank, nope);
  }
  if (c.has_indexer) {
    attn += mat(c.index_head_dim, c.hidden_size);  // the key, cached at every position
    if (Indexer::selects(keys, c.index_topk))
      attn += mat(c.index_n_heads * c.index_head_dim, c.q_lora_rank) +
              static_cast<size_t>(c.index_n_heads * c.hidden_size) * index_weights_elem_;
  }
  size_t total = dense(c.vocab_size, c.hidden_size);  // lm_head: never FP8 here
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    total += attn;
    if (c.is_moe_layer(l)) {
      total += static_cast<size_t>(c.n_routed_experts * c.hidden_size) * router_elem_;
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
  s.num_layers = static_cast<int64_t>(layers_.size());
  s.kv_lora_rank = config_.kv_lora_rank;
  s.rope_dim = config_.qk_rope_head_dim;
  s.index_dim = config_.has_indexer ? config_.index_head_dim : 0;
  s.block_size = block_size;
  s.num_blocks = num_blocks;
  s.latent_dtype = latent_cache_dtype_;
  s.index_dtype = index_cache_dtype_;
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

void Model::embed(const std::vector<SequenceChunk>& chunks, float* hidden) {
  const ModelConfig& c = config_;
  const int64_t d = c.hidden_size;
  const size_t elem = tensor::dtype_size(embed_.dtype());
  int64_t t = 0;
  for (const SequenceChunk& chunk : chunks)
    for (int32_t token : chunk.tokens) {
      if (token < 0 || token >= c.vocab_size)
        fail_input("token id {} is outside the vocabulary [0, {})", token, c.vocab_size);
      float* row = hidden + t * d;
      if (token >= vocab_begin_ && token < vocab_end_) {
        const auto* src = static_cast<const uint8_t*>(embed_.raw()) +
                          static_cast<size_t>((token - vocab_begin_) * d) * elem;
        tensor::convert_to_f32(embed_.dtype(), src, row, static_cast<size_t>(d));
      } else {
        std::memset(row, 0, static_cast<size_t>(d) * sizeof(float));  // another rank's row
      }
      ++t;
    }
  if (plan_.options.tp > 1) {
    comm_->set_scope(parallel::embed_scope());
    comm_->all_reduce(comm::Group::kTp, hidden, t * d);
  }
}

void Model::receive(Activations& io, int64_t n) {
  const int64_t d = config_.hidden_size;
  const int64_t rows = parallel::pp_intermediate_token_count(plan_, n);
  last_rows_received_ = rows;
  float* packed = scratch_.get(3, static_cast<size_t>(rows * 2 * d));
  comm_->set_scope(parallel::stage_entry_scope(stage_));
  const comm::Topology& topo = comm_->topology();
  comm_->recv(packed, rows * 2 * d, topo.world_rank_of(comm::Group::kPp, stage_ - 1));
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(io.hidden + r * d, packed + r * 2 * d, static_cast<size_t>(d) * sizeof(float));
    std::memcpy(io.residual + r * d, packed + r * 2 * d + d,
                static_cast<size_t>(d) * sizeof(float));
  }
  io.layout = plan_.stages[static_cast<size_t>(stage_)].entry_layout;
}

void Model::hand_off(Activations& io, int64_t n) {
  const int64_t d = config_.hidden_size;
  const int tp = plan_.options.tp;
  const parallel::StagePlan& stage = plan_.stages[static_cast<size_t>(stage_)];
  comm_->set_scope(parallel::stage_exit_scope(stage_));
  // Make the layout the boundary contract promises, then send exactly the contract's rows.
  if (stage.exit_layout == parallel::Layout::kFull && io.layout == parallel::Layout::kShard) {
    parallel::restore_full(io.hidden, io.residual, n, d, *comm_);
  } else if (stage.exit_layout == parallel::Layout::kShard &&
             io.layout == parallel::Layout::kFull) {
    parallel::keep_own_rows(io.hidden, n, d, tp_rank_, tp);
    parallel::keep_own_rows(io.residual, n, d, tp_rank_, tp);
  }
  io.layout = stage.exit_layout;
  const int64_t rows = parallel::pp_intermediate_token_count(plan_, n);
  last_rows_sent_ = rows;
  float* packed = scratch_.get(3, static_cast<size_t>(rows * 2 * d));
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(packed + r * 2 * d, io.hidden + r * d, static_cast<size_t>(d) * sizeof(float));
    std::memcpy(packed + r * 2 * d + d, io.residual + r * d,
                static_cast<size_t>(d) * sizeof(float));
  }
  const comm::Topology& topo = comm_->topology();
  comm_->send(packed, rows * 2 * d, topo.world_rank_of(comm::Group::kPp, stage_ + 1));
}

Tensor Model::logits(const std::vector<SequenceChunk>& chunks, Activations& io) {
  const ModelConfig& c = config_;
  const int64_t d = c.hidden_size;
  const int tp = plan_.options.tp;
  const int64_t n = meta_.num_tokens();
  if (comm_ != nullptr) comm_->set_scope(parallel::head_scope());
  // The last stage restores full rows before the final norm, whatever the contract.
  if (io.layout == parallel::Layout::kShard)
    parallel::restore_full(io.hidden, io.residual, n, d, *comm_);
  std::vector<int64_t>& rows = logit_rows_;  // reused: no allocation per step
  rows.clear();
  for (size_t s = 0; s < chunks.size(); ++s) {
    const auto& seq = meta_.sequences[s];
    for (int64_t i = chunks[s].all_logits ? 0 : seq.num_tokens - 1; i < seq.num_tokens; ++i)
      rows.push_back(seq.first_token + i);
  }
  const auto r_count = static_cast<int64_t>(rows.size());
  float* normed = scratch_.get(2, static_cast<size_t>(r_count * d));
  for (int64_t r = 0; r < r_count; ++r) {
    const int64_t row = rows[static_cast<size_t>(r)];
    ops::add_rms_norm(io.residual + row * d, io.hidden + row * d, final_norm_.data<float>(),
                      static_cast<float>(c.rms_norm_eps), 1, d, normed + r * d);
  }
  Tensor out = Tensor::empty({r_count, c.vocab_size}, DType::kF32);
  if (tp == 1) {
    lm_head_.forward(normed, r_count, out.data<float>());
    return out;
  }
  // Vocab-parallel head: each rank computes its slice (padded to ceil(V / tp) columns), one
  // all-gather assembles the rows.
  const int64_t part = (c.vocab_size + tp - 1) / tp;
  float* local = scratch_.get(4, static_cast<size_t>(r_count * part));
  std::memset(local, 0, static_cast<size_t>(r_count * part) * sizeof(float));
  lm_head_.forward(normed, r_count, local, d, part);
  float* gathered = scratch_.get(5, static_cast<size_t>(tp * r_count * part));
  comm_->all_gather(comm::Group::kTp, local, gathered, r_count * part);
  for (int p = 0; p < tp; ++p) {
    const int64_t begin = p * part;
    const int64_t width = std::min(c.vocab_size, begin + part) - begin;
    for (int64_t r = 0; r < r_count; ++r)
      std::memcpy(out.data<float>() + r * c.vocab_size + begin, gathered + (p * r_count + r) * part,
                  static_cast<size_t>(std::max<int64_t>(0, width)) * sizeof(float));
  }
  return out;
}

int Model::world_rank() const { return comm_ != nullptr ? comm_->topology().rank : 0; }

int32_t Model::share_sampled_token(int32_t token) {
  if (comm_ == nullptr || comm_->topology().world_size() == 1) return token;
  comm_->set_scope(parallel::sample_scope());
  comm_->broadcast(comm::Group::kWorld, &token, sizeof token,
                   (plan_.options.pp - 1) * plan_.options.tp);
  return token;
}

void Model::profile_run(int64_t max_tokens) {
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (max_tokens + kBlock - 1) / kBlock;
  cache::BlockManager manager(blocks, kBlock);
  cache::PagedCache cache(cache_shape(blocks, kBlock));
  cache::BlockTable table;
  manager.reserve(table, max_tokens);
  const std::vector<int32_t> tokens(static_cast<size_t>(max_tokens), 0);
  const comm::CommCounts saved = comm_ != nullptr ? comm_->counts() : comm::CommCounts{};
  forward({SequenceChunk{tokens, 0, &table, false}}, cache);
  if (comm_ != nullptr) comm_->restore_counts(saved);
}

Tensor Model::forward(const std::vector<SequenceChunk>& chunks, cache::PagedCache& cache,
                      StepTrace* trace) {
  const ModelConfig& c = config_;
  build_meta(chunks, cache.shape().block_size);
  last_rows_sent_ = last_rows_received_ = 0;
  const int64_t n = meta_.num_tokens();
  const int64_t d = c.hidden_size;
  const int tp = plan_.options.tp;
  const int64_t rows = tp * ((n + tp - 1) / tp);  // room for the padded rows of a shard layout
  Activations io{scratch_.get(0, static_cast<size_t>(rows * d)),
                 scratch_.get(1, static_cast<size_t>(rows * d)), parallel::Layout::kFull};
  if (trace != nullptr) {
    trace->indexer_topk.assign(static_cast<size_t>(c.num_hidden_layers), {});
    trace->experts.assign(static_cast<size_t>(c.num_hidden_layers), {});
  }
  if (is_first_stage()) {
    embed(chunks, io.hidden);
    // Layer 0 adds hidden into the residual like every layer: start the stream at zero.
    std::memset(io.residual, 0, static_cast<size_t>(n * d) * sizeof(float));
  } else {
    receive(io, n);
  }
  for (DecoderLayer& layer : layers_) layer.forward(io, meta_, cache, trace);
  if (!is_last_stage()) {
    hand_off(io, n);
    return Tensor();
  }
  return logits(chunks, io);
}

}  // namespace handoff::model
