#pragma once
// The model's config.json, parsed and checked once. Field meanings follow MODEL_SPEC §1.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace handoff::model {

enum class Family { kGlmMoeDsa, kDeepseekV32, kDeepseekV3 };

std::string_view family_name(Family family);
// "glm_moe_dsa" | "deepseek_v32" | "deepseek_v3"; throws InputError otherwise.
Family parse_family(std::string_view model_type);

struct RopeConfig {
  double theta = 10000.0;
  bool yarn = false;  // rope_scaling.type == "yarn" (always applied, as in HF and vLLM)
  double factor = 1.0;
  int64_t original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
};

struct ModelConfig {
  Family family = Family::kDeepseekV32;
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t q_lora_rank = 0;  // 0: no q LoRA (q_proj directly); not used by these families
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t intermediate_size = 0;      // dense MLP
  int64_t moe_intermediate_size = 0;  // per routed / shared expert
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  double rms_norm_eps = 1e-6;
  bool rope_interleave = true;           // MLA q_pe/k_pe layout
  bool indexer_rope_interleave = false;  // indexer layout (GLM-5 true, DeepSeek-V3.2 false)
  RopeConfig rope;
  int64_t max_position_embeddings = 0;
  // DSA indexer; has_indexer is false for deepseek_v3.
  bool has_indexer = false;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  int64_t num_nextn_predict_layers = 0;
  bool tie_word_embeddings = false;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  // FP8 block quantisation (quantization_config.weight_block_size); 0 when unquantised.
  int64_t weight_block_rows = 0;
  int64_t weight_block_cols = 0;
  std::string torch_dtype = "bfloat16";

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // A layer is MoE when idx >= first_k_dense_replace and idx % moe_layer_freq == 0.
  bool is_moe_layer(int64_t layer) const;
  // MLA softmax scale including the YaRN mscale² (MODEL_SPEC §1.2).
  double softmax_scale() const;
  // The RoPE inverse frequencies for qk_rope_head_dim, YaRN-corrected when configured.
  std::vector<float> rope_inv_freq() const;
  // index_n_heads^-0.5 · index_head_dim^-0.5
  double indexer_scale() const;

  nlohmann::json to_json() const;
};

// Parses and validates a config.json object; `source` (the file path) names errors, which are
// InputError naming the field: missing or wrongly typed field, unknown model_type, inconsistent
// dimensions, unsupported features (GLM-5.2 IndexShare fields).
ModelConfig parse_config(const nlohmann::json& json, const std::string& source);
ModelConfig load_config(const std::string& path);

}  // namespace handoff::model
