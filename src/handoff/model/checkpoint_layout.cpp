#include "handoff/model/checkpoint_layout.h"

#include <fmt/format.h>

namespace handoff::model {

std::vector<TensorSpec> checkpoint_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  const int64_t h = c.hidden_size;
  auto add = [&](std::string name, tensor::Shape shape, TensorKind kind, int64_t layer = -1,
                 int64_t expert = -1) {
    out.push_back({std::move(name), std::move(shape), kind, layer, expert});
  };
  add("model.embed_tokens.weight", {c.vocab_size, h}, TensorKind::kEmbedding);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    auto mat = [&](const std::string& n, int64_t rows, int64_t cols) {
      add(p + n, {rows, cols}, TensorKind::kMatrix, i);
    };
    add(p + "input_layernorm.weight", {h}, TensorKind::kNorm, i);
    add(p + "post_attention_layernorm.weight", {h}, TensorKind::kNorm, i);
    const int64_t heads = c.num_attention_heads;
    if (c.q_lora_rank > 0) {
      mat("self_attn.q_a_proj.weight", c.q_lora_rank, h);
      add(p + "self_attn.q_a_layernorm.weight", {c.q_lora_rank}, TensorKind::kNorm, i);
      mat("self_attn.q_b_proj.weight", heads * c.qk_head_dim(), c.q_lora_rank);
    } else {
      mat("self_attn.q_proj.weight", heads * c.qk_head_dim(), h);
    }
    mat("self_attn.kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, h);
    add(p + "self_attn.kv_a_layernorm.weight", {c.kv_lora_rank}, TensorKind::kNorm, i);
    mat("self_attn.kv_b_proj.weight", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    mat("self_attn.o_proj.weight", h, heads * c.v_head_dim);
    if (c.has_indexer) {
      mat("self_attn.indexer.wq_b.weight", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
      mat("self_attn.indexer.wk.weight", c.index_head_dim, h);
      add(p + "self_attn.indexer.k_norm.weight", {c.index_head_dim}, TensorKind::kNorm, i);
      add(p + "self_attn.indexer.k_norm.bias", {c.index_head_dim}, TensorKind::kNormBias, i);
      add(p + "self_attn.indexer.weights_proj.weight", {c.index_n_heads, h}, TensorKind::kRouter,
          i);
    }
    if (!c.is_moe_layer(i)) {
      mat("mlp.gate_proj.weight", c.intermediate_size, h);
      mat("mlp.up_proj.weight", c.intermediate_size, h);
      mat("mlp.down_proj.weight", h, c.intermediate_size);
      continue;
    }
    add(p + "mlp.gate.weight", {c.n_routed_experts, h}, TensorKind::kRouter, i);
    add(p + "mlp.gate.e_score_correction_bias", {c.n_routed_experts}, TensorKind::kRouterBias, i);
    const int64_t mi = c.moe_intermediate_size;
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      const std::string ep = fmt::format("{}mlp.experts.{}.", p, e);
      add(ep + "gate_proj.weight", {mi, h}, TensorKind::kMatrix, i, e);
      add(ep + "up_proj.weight", {mi, h}, TensorKind::kMatrix, i, e);
      add(ep + "down_proj.weight", {h, mi}, TensorKind::kMatrix, i, e);
    }
    if (c.n_shared_experts > 0) {
      const int64_t si = mi * c.n_shared_experts;
      mat("mlp.shared_experts.gate_proj.weight", si, h);
      mat("mlp.shared_experts.up_proj.weight", si, h);
      mat("mlp.shared_experts.down_proj.weight", h, si);
    }
  }
  add("model.norm.weight", {h}, TensorKind::kNorm);
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, h}, TensorKind::kMatrix);
  return out;
}

ParamCounts count_params(const ModelConfig& c) {
  ParamCounts counts;
  int64_t routed = 0;
  int64_t embedding = 0;
  for (const TensorSpec& t : checkpoint_tensors(c)) {
    const int64_t n = tensor::shape_numel(t.shape);
    counts.total += n;
    if (t.expert >= 0) routed += n;
    if (t.kind == TensorKind::kEmbedding) embedding += n;
  }
  const int64_t routed_active =
      c.n_routed_experts > 0 ? routed / c.n_routed_experts * c.num_experts_per_tok : 0;
  counts.active_per_token = counts.total - embedding - routed + routed_active;
  // A tied head reuses the embedding as the output matmul, which every token does run.
  if (c.tie_word_embeddings) counts.active_per_token += embedding;
  return counts;
}

}  // namespace handoff::model
