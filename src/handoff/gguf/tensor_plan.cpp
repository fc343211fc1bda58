#include "handoff/gguf/tensor_plan.h"

#include <fmt/format.h>

#include <map>
#include <regex>

#include "handoff/error.h"
#include "handoff/model/checkpoint_layout.h"

namespace handoff::gguf {

namespace {

using model::TensorKind;
using model::TensorSpec;

// HF suffixes inside layer N (after "model.layers.N.") -> llama.cpp's (after "blk.N.").
const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> names = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
      {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
      {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
      {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
      {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.indexer.wq_b.weight", "indexer.attn_q_b.weight"},
      {"self_attn.indexer.wk.weight", "indexer.attn_k.weight"},
      {"self_attn.indexer.k_norm.weight", "indexer.k_norm.weight"},
      {"self_attn.indexer.k_norm.bias", "indexer.k_norm.bias"},
      {"self_attn.indexer.weights_proj.weight", "indexer.proj.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
      {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
  };
  return names;
}

std::string gguf_name(const TensorSpec& spec) {
  if (spec.name == "model.embed_tokens.weight") return "token_embd.weight";
  if (spec.name == "model.norm.weight") return "output_norm.weight";
  if (spec.name == "lm_head.weight") return "output.weight";
  const std::string prefix = fmt::format("model.layers.{}.", spec.layer);
  if (spec.layer >= 0 && spec.name.starts_with(prefix)) {
    const auto it = layer_names().find(spec.name.substr(prefix.size()));
    if (it != layer_names().end()) return fmt::format("blk.{}.{}", spec.layer, it->second);
  }
  fail_input("export-gguf: no GGUF name for checkpoint tensor '{}'", spec.name);
}

// llama.cpp's converter keeps the router, the indexer's head weights, norms and biases in F32
// (they are small and precision-sensitive); everything else takes the main type.
TensorType type_of(const TensorSpec& spec, TensorType main_type) {
  switch (spec.kind) {
    case TensorKind::kNorm:
    case TensorKind::kNormBias:
    case TensorKind::kRouter:
    case TensorKind::kRouterBias:
      return TensorType::kF32;
    case TensorKind::kMatrix:
    case TensorKind::kEmbedding:
      break;
  }
  return spec.shape.size() <= 1 ? TensorType::kF32 : main_type;
}

}  // namespace

std::string gguf_architecture(model::Family family) {
  switch (family) {
    case model::Family::kDeepseekV3:
      return "deepseek2";
    case model::Family::kDeepseekV32:
      return "deepseek32";
    case model::Family::kGlmMoeDsa:
      break;
  }
  fail_input(
      "export-gguf: family '{}' has no GGUF export (supported: deepseek_v3 -> deepseek2, "
      "deepseek_v32 -> deepseek32)",
      model::family_name(family));
}

std::vector<PlannedTensor> plan_tensors(const model::ModelConfig& c, TensorType main_type) {
  gguf_architecture(c.family);  // refuses other families before any work
  std::vector<PlannedTensor> plan;
  const std::vector<TensorSpec> specs = model::checkpoint_tensors(c);
  static const std::regex expert_re(R"(model\.layers\.\d+\.mlp\.experts\.\d+\.(\w+)\.weight)");
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    if (s.expert >= 0) {
      // The layout lists a layer's experts together (gate, up, down per expert): stack each
      // matrix kind over all experts when the first expert is seen, then skip the rest.
      if (s.expert != 0) continue;
      std::smatch m;
      if (!std::regex_match(s.name, m, expert_re)) fail("export-gguf: bad expert name {}", s.name);
      const std::string proj = m[1];
      const std::string kind = proj.substr(0, proj.find('_'));  // gate | up | down
      PlannedTensor t;
      t.info.name = fmt::format("blk.{}.ffn_{}_exps.weight", s.layer, kind);
      t.info.shape = {c.n_routed_experts, s.shape[0], s.shape[1]};
      t.info.type = type_of(s, main_type);
      t.source = Source::kStackExperts;
      t.source_shape = s.shape;
      for (int64_t e = 0; e < c.n_routed_experts; ++e)
        t.sources.push_back(
            fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", s.layer, e, proj));
      plan.push_back(std::move(t));
      continue;
    }
    if (s.name.ends_with("self_attn.kv_b_proj.weight")) {
      const int64_t heads = c.num_attention_heads;
      PlannedTensor k;
      k.info.name = fmt::format("blk.{}.attn_k_b.weight", s.layer);
      k.info.shape = {heads, c.kv_lora_rank, c.qk_nope_head_dim};
      k.info.type = type_of(s, main_type);
      k.source = Source::kKeyB;
      k.sources = {s.name};
      k.source_shape = s.shape;
      PlannedTensor v = k;
      v.info.name = fmt::format("blk.{}.attn_v_b.weight", s.layer);
      v.info.shape = {heads, c.v_head_dim, c.kv_lora_rank};
      v.source = Source::kValueB;
      plan.push_back(std::move(k));
      plan.push_back(std::move(v));
      continue;
    }
    PlannedTensor t;
    t.info.name = gguf_name(s);
    t.info.shape = s.shape;
    t.info.type = type_of(s, main_type);
    t.sources = {s.name};
    t.source_shape = s.shape;
    plan.push_back(std::move(t));
  }
  return plan;
}

}  // namespace handoff::gguf
