#include "handoff/model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>

#include "handoff/error.h"

namespace handoff::model {
namespace {

using nlohmann::json;

// Reads typed fields of one JSON object and names `source` and the field in every error, so a
// user can find the offending line of config.json without reading our code.
class FieldReader {
 public:
  FieldReader(const json& obj, const std::string& source, std::string prefix = "")
      : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  // A null value counts as absent: HF writes `null` for unset optional fields.
  bool has(const char* name) const { return obj_.contains(name) && !obj_.at(name).is_null(); }

  int64_t integer(const char* name) const {
    const json& v = require(name);
    if (!v.is_number_integer()) wrong_type(name, "an integer", v);
    return v.get<int64_t>();
  }
  int64_t integer(const char* name, int64_t fallback) const {
    return has(name) ? integer(name) : fallback;
  }
  double number(const char* name) const {
    const json& v = require(name);
    if (!v.is_number()) wrong_type(name, "a number", v);
    return v.get<double>();
  }
  double number(const char* name, double fallback) const {
    return has(name) ? number(name) : fallback;
  }
  bool boolean(const char* name, bool fallback) const {
    if (!has(name)) return fallback;
    const json& v = obj_.at(name);
    if (!v.is_boolean()) wrong_type(name, "a boolean", v);
    return v.get<bool>();
  }
  std::string string(const char* name) const {
    const json& v = require(name);
    if (!v.is_string()) wrong_type(name, "a string", v);
    return v.get<std::string>();
  }
  std::string string(const char* name, const std::string& fallback) const {
    return has(name) ? string(name) : fallback;
  }
  const json& object(const char* name) const {
    const json& v = require(name);
    if (!v.is_object()) wrong_type(name, "an object", v);
    return v;
  }

  std::string field(const char* name) const { return prefix_ + name; }

  [[noreturn]] void invalid(const char* name, const std::string& why) const {
    fail_input("{}: field '{}': {}", source_, field(name), why);
  }

 private:
  const json& require(const char* name) const {
    if (!has(name)) fail_input("{}: missing required field '{}'", source_, field(name));
    return obj_.at(name);
  }
  [[noreturn]] void wrong_type(const char* name, const char* expected, const json& v) const {
    fail_input("{}: field '{}' must be {}, got {} ({})", source_, field(name), expected,
               v.type_name(), v.dump());
  }

  const json& obj_;
  const std::string& source_;
  std::string prefix_;
};

// Upper bounds far beyond any real model (DeepSeek-V3 / GLM-5: 61-78 layers, 7168-6144 hidden,
// 64-128 heads, 256 experts, 129k-155k vocabulary, 164k-203k positions). They keep every size
// the planner and the loader compute (vocab x hidden, heads x head dim x rank, experts x
// intermediate x hidden, layers x any of these) far inside int64, and a loop over layers short.
constexpr int64_t kMaxLayers = int64_t{1} << 12;
constexpr int64_t kMaxDim = int64_t{1} << 20;  // hidden, intermediate, ranks, head dims
constexpr int64_t kMaxHeads = int64_t{1} << 12;
constexpr int64_t kMaxExperts = int64_t{1} << 16;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxPositions = int64_t{1} << 24;
constexpr double kMinPositive = 1e-6;  // smaller factors are typos, not configurations
constexpr double kMaxRopeTheta = 1e12;
constexpr double kMaxRopeFactor = 1e6;
constexpr double kMaxBeta = 1e6;
constexpr double kMaxMscale = 1e3;
constexpr double kMaxRoutedScaling = 1e3;

void require_in(const FieldReader& r, const char* name, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return;
  if (lo == 1) r.invalid(name, fmt::format("must be positive and at most {}, got {}", hi, value));
  r.invalid(name, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
}
// A finite number in [lo, hi].
void require_number_in(const FieldReader& r, const char* name, double value, double lo, double hi) {
  if (!(std::isfinite(value) && value >= lo && value <= hi))
    r.invalid(name,
              fmt::format("must be a finite number in [{:g}, {:g}], got {:g}", lo, hi, value));
}

// The YaRN fields shared by `rope_scaling` and GLM's `rope_parameters`.
void parse_yarn(const FieldReader& r, RopeConfig& rope) {
  rope.yarn = true;
  rope.factor = r.number("factor");
  rope.original_max_position_embeddings = r.integer("original_max_position_embeddings", 4096);
  rope.beta_fast = r.number("beta_fast", 32.0);
  rope.beta_slow = r.number("beta_slow", 1.0);
  rope.mscale = r.number("mscale", 1.0);
  rope.mscale_all_dim = r.number("mscale_all_dim", 0.0);
  // YaRN stretches the context by `factor` (HF requires >= 1; below it the scaling is a no-op
  // in the reference, and a tiny factor divides frequencies into infinities).
  require_number_in(r, "factor", rope.factor, 1.0, kMaxRopeFactor);
  require_in(r, "original_max_position_embeddings", rope.original_max_position_embeddings, 1,
             kMaxPositions);
  require_number_in(r, "beta_fast", rope.beta_fast, kMinPositive, kMaxBeta);
  require_number_in(r, "beta_slow", rope.beta_slow, kMinPositive, kMaxBeta);
  require_number_in(r, "mscale", rope.mscale, kMinPositive, kMaxMscale);
  // 0 is the reference's "no attention-scale correction".
  require_number_in(r, "mscale_all_dim", rope.mscale_all_dim, 0.0, kMaxMscale);
}

// Reads the scaling type from `type` (DeepSeek) or `rope_type` (newer HF); only YaRN and plain
// RoPE exist in these model families, anything else would silently compute wrong angles.
void parse_rope_kind(const FieldReader& r, RopeConfig& rope) {
  const char* key = r.has("rope_type") ? "rope_type" : "type";
  const std::string kind = r.string(key, "default");
  if (kind == "yarn") {
    parse_yarn(r, rope);
  } else if (kind != "default") {
    r.invalid(key,
              fmt::format("unsupported RoPE scaling '{}' (expected 'yarn' or 'default')", kind));
  }
}

// theta <= 1 gives no frequency decay (and log(theta) = 0 divides YaRN's correction range).
void check_theta(const FieldReader& r, double theta) {
  if (!(std::isfinite(theta) && theta > 1.0 && theta <= kMaxRopeTheta))
    r.invalid("rope_theta",
              fmt::format("must be a finite number in (1, {:g}], got {:g}", kMaxRopeTheta, theta));
}

RopeConfig parse_rope(const json& j, const std::string& source) {
  const FieldReader top(j, source);
  RopeConfig rope;
  if (top.has("rope_parameters")) {
    const FieldReader r(top.object("rope_parameters"), source, "rope_parameters.");
    if (r.has("rope_theta")) {
      rope.theta = r.number("rope_theta");
      check_theta(r, rope.theta);
    } else {
      rope.theta = top.number("rope_theta", 10000.0);
      check_theta(top, rope.theta);
    }
    parse_rope_kind(r, rope);
  } else {
    rope.theta = top.number("rope_theta", 10000.0);
    check_theta(top, rope.theta);
    if (top.has("rope_scaling")) {
      const FieldReader r(top.object("rope_scaling"), source, "rope_scaling.");
      parse_rope_kind(r, rope);
    }
  }
  return rope;
}

std::vector<int64_t> parse_eos(const json& j, const std::string& source) {
  if (!j.contains("eos_token_id") || j.at("eos_token_id").is_null()) return {};
  const json& v = j.at("eos_token_id");
  std::vector<int64_t> ids;
  if (v.is_number_integer()) {
    ids.push_back(v.get<int64_t>());
  } else if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number_integer())
        fail_input("{}: field 'eos_token_id' must be an integer or a list of integers, got {}",
                   source, v.dump());
      ids.push_back(e.get<int64_t>());
    }
  } else {
    fail_input("{}: field 'eos_token_id' must be an integer or a list of integers, got {}", source,
               v.dump());
  }
  return ids;
}

void parse_quantization(const FieldReader& top, ModelConfig& c) {
  if (!top.has("quantization_config")) return;
  const json& qj = top.object("quantization_config");
  if (!qj.contains("weight_block_size") || qj.at("weight_block_size").is_null()) return;
  const json& b = qj.at("weight_block_size");
  if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
      b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0)
    top.invalid("quantization_config",
                fmt::format("weight_block_size must be two positive integers [rows, cols], got {}",
                            b.dump()));
  c.weight_block_rows = b[0].get<int64_t>();
  c.weight_block_cols = b[1].get<int64_t>();
}

// Cross-field consistency: every check here is a shape or routing assumption the forward pass
// relies on, so a bad config fails at load time instead of producing garbage. Every size is
// bounded first, so nothing below (or in the planner) can overflow or loop for ages.
void validate(const FieldReader& r, const ModelConfig& c) {
  require_in(r, "vocab_size", c.vocab_size, 1, kMaxVocab);
  require_in(r, "hidden_size", c.hidden_size, 1, kMaxDim);
  require_in(r, "num_hidden_layers", c.num_hidden_layers, 1, kMaxLayers);
  require_in(r, "num_attention_heads", c.num_attention_heads, 1, kMaxHeads);
  require_in(r, "q_lora_rank", c.q_lora_rank, 0, kMaxDim);
  require_in(r, "kv_lora_rank", c.kv_lora_rank, 1, kMaxDim);
  require_in(r, "qk_nope_head_dim", c.qk_nope_head_dim, 1, kMaxDim);
  require_in(r, "qk_rope_head_dim", c.qk_rope_head_dim, 1, kMaxDim);
  require_in(r, "v_head_dim", c.v_head_dim, 1, kMaxDim);
  require_in(r, "intermediate_size", c.intermediate_size, 1, kMaxDim);
  require_in(r, "n_routed_experts", c.n_routed_experts, 0, kMaxExperts);
  require_in(r, "n_shared_experts", c.n_shared_experts, 0, kMaxExperts);
  require_in(r, "n_group", c.n_group, 1, kMaxExperts);
  require_in(r, "topk_group", c.topk_group, 1, kMaxExperts);
  require_in(r, "moe_layer_freq", c.moe_layer_freq, 1, kMaxLayers);
  require_in(r, "first_k_dense_replace", c.first_k_dense_replace, 0, kMaxLayers);
  require_in(r, "num_nextn_predict_layers", c.num_nextn_predict_layers, 0, kMaxLayers);
  require_in(r, "max_position_embeddings", c.max_position_embeddings, 1, kMaxPositions);
  if (!(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0 && c.rms_norm_eps < 1))
    r.invalid("rms_norm_eps",
              fmt::format("must be a finite number in (0, 1), got {:g}", c.rms_norm_eps));
  // The router's weights multiply every routed expert's output: <= 0 flips or zeroes them.
  if (!(std::isfinite(c.routed_scaling_factor) && c.routed_scaling_factor > 0 &&
        c.routed_scaling_factor <= kMaxRoutedScaling))
    r.invalid("routed_scaling_factor", fmt::format("must be a finite number in (0, {:g}], got {:g}",
                                                   kMaxRoutedScaling, c.routed_scaling_factor));
  if (c.weight_block_rows > kMaxDim || c.weight_block_cols > kMaxDim)
    r.invalid("quantization_config",
              fmt::format("weight_block_size [{}, {}] exceeds {}", c.weight_block_rows,
                          c.weight_block_cols, kMaxDim));
  if (c.qk_rope_head_dim % 2 != 0)
    r.invalid("qk_rope_head_dim",
              fmt::format("must be even (RoPE rotates pairs), got {}", c.qk_rope_head_dim));
  if (c.first_k_dense_replace > c.num_hidden_layers)
    r.invalid("first_k_dense_replace", fmt::format("{} exceeds num_hidden_layers {}",
                                                   c.first_k_dense_replace, c.num_hidden_layers));
  if (c.n_routed_experts > 0 || c.n_shared_experts > 0)
    require_in(r, "moe_intermediate_size", c.moe_intermediate_size, 1, kMaxDim);
  if (c.n_routed_experts > 0) {
    require_in(r, "num_experts_per_tok", c.num_experts_per_tok, 1, c.n_routed_experts);
    if (c.n_routed_experts % c.n_group != 0)
      r.invalid("n_group", fmt::format("n_routed_experts {} is not divisible by n_group {}",
                                       c.n_routed_experts, c.n_group));
    if (c.topk_group > c.n_group)
      r.invalid("topk_group",
                fmt::format("topk_group {} exceeds n_group {}", c.topk_group, c.n_group));
    const int64_t selectable = c.topk_group * (c.n_routed_experts / c.n_group);
    if (c.num_experts_per_tok > selectable)
      r.invalid(
          "num_experts_per_tok",
          fmt::format("{} experts per token, but the {} selected group(s) hold only {} experts",
                      c.num_experts_per_tok, c.topk_group, selectable));
  }
  if (c.has_indexer) {
    require_in(r, "index_n_heads", c.index_n_heads, 1, kMaxHeads);
    require_in(r, "index_head_dim", c.index_head_dim, 1, kMaxDim);
    require_in(r, "index_topk", c.index_topk, 1, kMaxPositions);
    if (c.index_head_dim < c.qk_rope_head_dim)
      r.invalid("index_head_dim",
                fmt::format("{} is smaller than qk_rope_head_dim {} (the indexer rotates its "
                            "first qk_rope_head_dim dims)",
                            c.index_head_dim, c.qk_rope_head_dim));
    if (c.q_lora_rank <= 0)
      r.invalid("q_lora_rank", "the DSA indexer needs a positive q_lora_rank (its query input)");
  }
  for (int64_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size)
      r.invalid("eos_token_id",
                fmt::format("{} is outside the vocabulary [0, {})", id, c.vocab_size));
  if (c.bos_token_id && (*c.bos_token_id < 0 || *c.bos_token_id >= c.vocab_size))
    r.invalid("bos_token_id",
              fmt::format("{} is outside the vocabulary [0, {})", *c.bos_token_id, c.vocab_size));
}

}  // namespace

std::string_view family_name(Family family) {
  switch (family) {
    case Family::kGlmMoeDsa:
      return "glm_moe_dsa";
    case Family::kDeepseekV32:
      return "deepseek_v32";
    case Family::kDeepseekV3:
      return "deepseek_v3";
  }
  return "unknown";
}

Family parse_family(std::string_view model_type) {
  if (model_type == "glm_moe_dsa") return Family::kGlmMoeDsa;
  if (model_type == "deepseek_v32") return Family::kDeepseekV32;
  if (model_type == "deepseek_v3") return Family::kDeepseekV3;
  fail_input("unsupported model_type '{}' (expected glm_moe_dsa, deepseek_v32 or deepseek_v3)",
             model_type);
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
}

double ModelConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  // DeepSeek's yarn_get_mscale returns 1 for factor <= 1, so no correction then.
  if (rope.yarn && rope.mscale_all_dim > 0 && rope.factor > 1) {
    const double m = 0.1 * rope.mscale_all_dim * std::log(rope.factor) + 1.0;
    scale *= m * m;
  }
  return scale;
}

std::vector<float> ModelConfig::rope_inv_freq() const {
  const int64_t d = qk_rope_head_dim;
  const int64_t half = d / 2;
  const double theta = rope.theta;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    freq[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(d));
  std::vector<float> out(freq.size());
  if (!rope.yarn) {
    for (size_t i = 0; i < freq.size(); ++i) out[i] = static_cast<float>(freq[i]);
    return out;
  }
  // DeepSeek reference (find_correction_range / linear_ramp_factor): the range is clamped to
  // [0, d-1] although the ramp only has d/2 entries; we follow it to match the checkpoints.
  const double orig = static_cast<double>(rope.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return static_cast<double>(d) * std::log(orig / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(theta));
  };
  const double low = std::max(std::floor(correction_dim(rope.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(rope.beta_slow)), static_cast<double>(d - 1));
  if (high == low) high += 0.001;
  for (int64_t i = 0; i < half; ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    out[i] = static_cast<float>(freq[i] * (1.0 - ramp) + freq[i] / rope.factor * ramp);
  }
  return out;
}

double ModelConfig::indexer_scale() const {
  if (!has_indexer) return 0.0;
  return 1.0 / std::sqrt(static_cast<double>(index_n_heads)) /
         std::sqrt(static_cast<double>(index_head_dim));
}

nlohmann::json ModelConfig::to_json() const {
  json j;
  switch (family) {
    case Family::kGlmMoeDsa:
      j["architectures"] = {"GlmMoeDsaForCausalLM"};
      break;
    case Family::kDeepseekV32:
      j["architectures"] = {"DeepseekV32ForCausalLM"};
      break;
    case Family::kDeepseekV3:
      j["architectures"] = {"DeepseekV3ForCausalLM"};
      break;
  }
  j["model_type"] = std::string(family_name(family));
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_attention_heads;
  if (q_lora_rank > 0) {
    j["q_lora_rank"] = q_lora_rank;
  } else {
    j["q_lora_rank"] = nullptr;
  }
  j["kv_lora_rank"] = kv_lora_rank;
  j["qk_nope_head_dim"] = qk_nope_head_dim;
  j["qk_rope_head_dim"] = qk_rope_head_dim;
  j["v_head_dim"] = v_head_dim;
  j["intermediate_size"] = intermediate_size;
  j["moe_intermediate_size"] = moe_intermediate_size;
  j["n_routed_experts"] = n_routed_experts;
  j["n_shared_experts"] = n_shared_experts;
  j["num_experts_per_tok"] = num_experts_per_tok;
  j["n_group"] = n_group;
  j["topk_group"] = topk_group;
  j["routed_scaling_factor"] = routed_scaling_factor;
  j["norm_topk_prob"] = norm_topk_prob;
  j["scoring_func"] = "sigmoid";
  j["topk_method"] = "noaux_tc";
  j["first_k_dense_replace"] = first_k_dense_replace;
  j["moe_layer_freq"] = moe_layer_freq;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_interleave"] = rope_interleave;
  if (has_indexer) j["indexer_rope_interleave"] = indexer_rope_interleave;
  json scaling;
  if (rope.yarn) {
    scaling = {{"factor", rope.factor},
               {"original_max_position_embeddings", rope.original_max_position_embeddings},
               {"beta_fast", rope.beta_fast},
               {"beta_slow", rope.beta_slow},
               {"mscale", rope.mscale},
               {"mscale_all_dim", rope.mscale_all_dim}};
  }
  if (family == Family::kGlmMoeDsa) {
    // GLM's transformers config nests theta and type in rope_parameters.
    json params = rope.yarn ? scaling : json::object();
    params["rope_theta"] = rope.theta;
    params["rope_type"] = rope.yarn ? "yarn" : "default";
    j["rope_parameters"] = params;
  } else {
    j["rope_theta"] = rope.theta;
    if (rope.yarn) {
      scaling["type"] = "yarn";
      j["rope_scaling"] = scaling;
    } else {
      j["rope_scaling"] = nullptr;
    }
  }
  j["max_position_embeddings"] = max_position_embeddings;
  if (has_indexer) {
    j["index_n_heads"] = index_n_heads;
    j["index_head_dim"] = index_head_dim;
    j["index_topk"] = index_topk;
  }
  j["num_nextn_predict_layers"] = num_nextn_predict_layers;
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (eos_token_ids.size() == 1) {
    j["eos_token_id"] = eos_token_ids[0];
  } else if (!eos_token_ids.empty()) {
    j["eos_token_id"] = eos_token_ids;
  }
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (weight_block_rows > 0) {
    j["quantization_config"] = {{"quant_method", "fp8"},
                                {"fmt", "e4m3"},
                                {"activation_scheme", "dynamic"},
                                {"weight_block_size", {weight_block_rows, weight_block_cols}}};
  }
  j["attention_bias"] = false;
  j["torch_dtype"] = torch_dtype;
  j["use_cache"] = true;
  return j;
}

ModelConfig parse_config(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) fail_input("{}: config must be a JSON object, got {}", source, j.type_name());
  const FieldReader r(j, source);
  // GLM-5.2 IndexShare reuses one layer's top-k in later layers; computing every layer's own
  // indexer instead would silently diverge, so refuse these configs outright.
  for (const char* name :
       {"index_topk_freq", "index_skip_topk_offset", "index_topk_pattern", "indexer_types"}) {
    if (j.contains(name))
      fail_input("{}: field '{}' (GLM-5.2 IndexShare) is not supported", source, name);
  }
  ModelConfig c;
  c.model_type = r.string("model_type");
  try {
    c.family = parse_family(c.model_type);
  } catch (const InputError& e) {
    fail_input("{}: field 'model_type': {}", source, e.what());
  }
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  c.q_lora_rank = r.integer("q_lora_rank", 0);
  c.kv_lora_rank = r.integer("kv_lora_rank");
  c.qk_nope_head_dim = r.integer("qk_nope_head_dim");
  c.qk_rope_head_dim = r.integer("qk_rope_head_dim");
  c.v_head_dim = r.integer("v_head_dim");
  c.intermediate_size = r.integer("intermediate_size");
  c.n_routed_experts = r.integer("n_routed_experts");
  c.n_shared_experts = r.integer("n_shared_experts", 0);
  if (c.n_routed_experts > 0 || c.n_shared_experts > 0) {
    c.moe_intermediate_size = r.integer("moe_intermediate_size");
  }
  if (c.n_routed_experts > 0) c.num_experts_per_tok = r.integer("num_experts_per_tok");
  c.n_group = r.integer("n_group", 1);
  c.topk_group = r.integer("topk_group", 1);
  c.routed_scaling_factor = r.number("routed_scaling_factor", 1.0);
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.first_k_dense_replace = r.integer("first_k_dense_replace", 0);
  c.moe_layer_freq = r.integer("moe_layer_freq", 1);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.rope_interleave = r.boolean("rope_interleave", true);
  c.indexer_rope_interleave = r.boolean("indexer_rope_interleave", c.family == Family::kGlmMoeDsa);
  c.rope = parse_rope(j, source);
  c.max_position_embeddings = r.integer("max_position_embeddings", 4096);
  if (c.family == Family::kDeepseekV3) {
    for (const char* name : {"index_n_heads", "index_head_dim", "index_topk"})
      if (r.has(name))
        r.invalid(name,
                  "model_type deepseek_v3 has no DSA indexer; use deepseek_v32 or "
                  "remove the field");
    c.has_indexer = false;
  } else {
    c.has_indexer = true;
    c.index_n_heads = r.integer("index_n_heads");
    c.index_head_dim = r.integer("index_head_dim");
    c.index_topk = r.integer("index_topk");
  }
  c.num_nextn_predict_layers = r.integer("num_nextn_predict_layers", 0);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.eos_token_ids = parse_eos(j, source);
  if (r.has("bos_token_id")) c.bos_token_id = r.integer("bos_token_id");
  parse_quantization(r, c);
  // Newer transformers write `dtype` instead of `torch_dtype`.
  c.torch_dtype = r.has("torch_dtype") ? r.string("torch_dtype") : r.string("dtype", "bfloat16");
  validate(r, c);
  return c;
}

ModelConfig load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail_input("{}: cannot open config file", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    fail_input("{}: invalid JSON: {}", path, e.what());
  }
  return parse_config(j, path);
}

}  // namespace handoff::model
