#include "handoff/gguf/model_metadata.h"

#include "handoff/error.h"
#include "handoff/gguf/tensor_plan.h"

namespace handoff::gguf {

namespace {
// llama_expert_gating_func_type: Handoff's DeepSeek routers score with a sigmoid.
constexpr uint32_t kGatingSigmoid = 2;

uint32_t u32(int64_t v, const char* field) {
  if (v < 0 || v > int64_t{UINT32_MAX})
    fail_input("export-gguf: {} = {} does not fit uint32", field, v);
  return static_cast<uint32_t>(v);
}
}  // namespace

void add_model_metadata(Metadata& md, const model::ModelConfig& c, const std::string& name,
                        uint32_t file_type) {
  const std::string arch = gguf_architecture(c.family);
  // llama.cpp's deepseek2 ropes q_pe / k_pe as adjacent pairs (the interleaved layout), and its
  // DSA indexer as halves; a checkpoint laid out otherwise would run, wrongly.
  if (!c.rope_interleave)
    fail_input("export-gguf: rope_interleave = false is not what llama.cpp's {} computes", arch);
  if (c.has_indexer && c.indexer_rope_interleave)
    fail_input("export-gguf: indexer_rope_interleave = true is not what llama.cpp's {} computes",
               arch);
  if (c.rope.yarn && c.rope.mscale != 1.0)
    fail_input("export-gguf: rope_scaling.mscale = {} (llama.cpp's {} assumes 1)", c.rope.mscale,
               arch);
  const std::string a = arch + ".";
  md.add_string("general.architecture", arch);
  md.add_string("general.name", name);
  md.add_u32(a + "block_count", u32(c.num_hidden_layers, "num_hidden_layers"));
  md.add_u32(a + "context_length", u32(c.max_position_embeddings, "max_position_embeddings"));
  md.add_u32(a + "embedding_length", u32(c.hidden_size, "hidden_size"));
  md.add_u32(a + "feed_forward_length", u32(c.intermediate_size, "intermediate_size"));
  md.add_u32(a + "attention.head_count", u32(c.num_attention_heads, "num_attention_heads"));
  md.add_u32(a + "attention.head_count_kv", 1);  // MLA runs as MQA over the latent
  if (c.rope.yarn) {
    md.add_string(a + "rope.scaling.type", "yarn");
    md.add_f32(a + "rope.scaling.factor", static_cast<float>(c.rope.factor));
    md.add_u32(a + "rope.scaling.original_context_length",
               u32(c.rope.original_max_position_embeddings, "original_max_position_embeddings"));
    md.add_f32(a + "rope.scaling.yarn_beta_fast", static_cast<float>(c.rope.beta_fast));
    md.add_f32(a + "rope.scaling.yarn_beta_slow", static_cast<float>(c.rope.beta_slow));
  }
  md.add_f32(a + "rope.freq_base", static_cast<float>(c.rope.theta));
  md.add_f32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  md.add_u32(a + "expert_count", u32(c.n_routed_experts, "n_routed_experts"));
  md.add_u32(a + "expert_used_count", u32(c.num_experts_per_tok, "num_experts_per_tok"));
  md.add_u32(a + "expert_group_count", u32(c.n_group, "n_group"));
  md.add_u32(a + "expert_group_used_count", u32(c.topk_group, "topk_group"));
  md.add_u32(a + "expert_gating_func", kGatingSigmoid);
  md.add_u32("general.file_type", file_type);
  md.add_u32(a + "leading_dense_block_count",
             u32(c.first_k_dense_replace, "first_k_dense_replace"));
  md.add_u32(a + "vocab_size", u32(c.vocab_size, "vocab_size"));
  if (c.q_lora_rank > 0) md.add_u32(a + "attention.q_lora_rank", u32(c.q_lora_rank, "q_lora_rank"));
  md.add_u32(a + "attention.kv_lora_rank", u32(c.kv_lora_rank, "kv_lora_rank"));
  // The absorbed form's head sizes (latent + rope key, latent value), then the MHA ones.
  md.add_u32(a + "attention.key_length", u32(c.kv_lora_rank + c.qk_rope_head_dim, "key_length"));
  md.add_u32(a + "attention.value_length", u32(c.kv_lora_rank, "kv_lora_rank"));
  md.add_u32(a + "attention.key_length_mla", u32(c.qk_head_dim(), "qk_head_dim"));
  md.add_u32(a + "attention.value_length_mla", u32(c.v_head_dim, "v_head_dim"));
  md.add_u32(a + "expert_feed_forward_length",
             u32(c.moe_intermediate_size, "moe_intermediate_size"));
  md.add_u32(a + "expert_shared_count", u32(c.n_shared_experts, "n_shared_experts"));
  md.add_f32(a + "expert_weights_scale", static_cast<float>(c.routed_scaling_factor));
  if (c.norm_topk_prob) md.add_bool(a + "expert_weights_norm", true);
  md.add_u32(a + "rope.dimension_count", u32(c.qk_rope_head_dim, "qk_rope_head_dim"));
  // llama.cpp's deepseek2 takes 0.1 * mscale_all_dim here (its converter's convention).
  if (c.rope.yarn)
    md.add_f32(a + "rope.scaling.yarn_log_multiplier",
               static_cast<float>(0.1 * c.rope.mscale_all_dim));
  if (c.has_indexer) {
    md.add_u32(a + "nextn_predict_layers", 0);  // MTP layers are not exported
    md.add_u32(a + "attention.indexer.head_count", u32(c.index_n_heads, "index_n_heads"));
    md.add_u32(a + "attention.indexer.key_length", u32(c.index_head_dim, "index_head_dim"));
    md.add_u32(a + "attention.indexer.top_k", u32(c.index_topk, "index_topk"));
  }
}

}  // namespace handoff::gguf
