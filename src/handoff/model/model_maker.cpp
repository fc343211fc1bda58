#include "handoff/model/model_maker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <regex>
#include <utility>
#include <vector>

#include "handoff/error.h"
#include "handoff/model/load_progress.h"
#include "handoff/model/safetensors.h"
#include "handoff/tensor/tensor.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::model {
namespace {

namespace fs = std::filesystem;
using tensor::DType;

// Elements generated per RNG stream. Each chunk is seeded from (tensor, chunk index), so the
// output does not depend on the thread count.
constexpr int64_t kChunk = int64_t{1} << 16;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256**: fast, and good enough for weights that only need to look Gaussian.
class Xoshiro {
 public:
  explicit Xoshiro(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 24 random bits.
  float uniform_f() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

uint64_t hash_name(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;  // FNV-1a, then mixed
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return splitmix64(h);
}

enum class Dist { kNormal, kUniform };

struct Init {
  Dist dist;
  double center;
  double scale;  // stddev for normal, half-width for uniform
};

Init init_for(const TensorSpec& spec) {
  switch (spec.kind) {
    case TensorKind::kEmbedding:
      return {Dist::kNormal, 0.0, 1.0};
    case TensorKind::kNorm:
      return {Dist::kUniform, 1.0, 0.02};
    case TensorKind::kNormBias:
    case TensorKind::kRouterBias:
      return {Dist::kNormal, 0.0, 0.05};
    case TensorKind::kMatrix:
    case TensorKind::kRouter:
      break;
  }
  return {Dist::kNormal, 0.0, 1.0 / std::sqrt(static_cast<double>(spec.shape.back()))};
}

void fill_chunk(Xoshiro& rng, const Init& init, float* out, int64_t n) {
  const float center = static_cast<float>(init.center);
  const float scale = static_cast<float>(init.scale);
  if (init.dist == Dist::kUniform) {
    for (int64_t i = 0; i < n; ++i) out[i] = center + scale * (2.0f * rng.uniform_f() - 1.0f);
    return;
  }
  // Marsaglia's polar method in float: one log and one sqrt per two normals, no trig. Speed
  // matters here (bench-moe draws 1.25 B values); weights need no more precision.
  for (int64_t i = 0; i < n; i += 2) {
    float u, v, q;
    do {
      u = 2.0f * rng.uniform_f() - 1.0f;
      v = 2.0f * rng.uniform_f() - 1.0f;
      q = u * u + v * v;
    } while (q >= 1.0f || q == 0.0f);
    const float f = std::sqrt(-2.0f * std::log(q) / q);
    out[i] = center + scale * u * f;
    if (i + 1 < n) out[i + 1] = center + scale * v * f;
  }
}

// Fills `dst` (numel(spec.shape) elements of `dtype`) with the spec's init distribution.
void generate(const TensorSpec& spec, DType dtype, uint64_t seed, void* dst) {
  const Init init = init_for(spec);
  const uint64_t tensor_seed = hash_name(seed, spec.name);
  const int64_t n = tensor::shape_numel(spec.shape);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  auto* base = static_cast<uint8_t*>(dst);
  const size_t esize = tensor::dtype_size(dtype);
  tensor::parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<float> buf(dtype == DType::kF32 ? 0 : kChunk);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t begin = c * kChunk;
      const int64_t len = std::min(kChunk, n - begin);
      Xoshiro rng(tensor_seed + static_cast<uint64_t>(c) * 0x9e3779b97f4a7c15ull);
      if (dtype == DType::kF32) {
        fill_chunk(rng, init, reinterpret_cast<float*>(base) + begin, len);
      } else {
        fill_chunk(rng, init, buf.data(), len);
        tensor::convert_from_f32(buf.data(), dtype, base + begin * esize, static_cast<size_t>(len));
      }
    }
  });
}

// Indexer query heads in antithetic pairs (head 2j+1 = -head 2j), as in the goldens: each pair
// then has exactly one positive ReLU term, so index scores are never exactly 0 and top-k has no
// exact ties.
void make_antithetic(void* wq_b, DType dtype, int64_t heads, int64_t head_dim, int64_t cols) {
  const int64_t head_elems = head_dim * cols;
  for (int64_t h = 0; h + 1 < heads; h += 2) {
    if (dtype == DType::kF32) {
      const float* src = static_cast<float*>(wq_b) + h * head_elems;
      float* dst = static_cast<float*>(wq_b) + (h + 1) * head_elems;
      for (int64_t i = 0; i < head_elems; ++i) dst[i] = -src[i];
    } else {  // bf16: negation is a sign-bit flip, exact
      const uint16_t* src = static_cast<uint16_t*>(wq_b) + h * head_elems;
      uint16_t* dst = static_cast<uint16_t*>(wq_b) + (h + 1) * head_elems;
      for (int64_t i = 0; i < head_elems; ++i) dst[i] = src[i] ^ 0x8000u;
    }
  }
}

bool is_model_file(const std::string& name) {
  static const std::regex shard(R"(model-\d+-of-\d+\.safetensors)");
  return name == "config.json" || name == "model.safetensors" || name == "tokenizer.json" ||
         name == "tokenizer_config.json" || name == "chat_template.jinja" ||
         name == "special_tokens_map.json" || name == "generation_config.json" ||
         name == "model.safetensors.index.json" || std::regex_match(name, shard);
}

// Creates out_dir, or clears a previous model from it; refuses to touch any other content.
void prepare_out_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir) && !fs::is_directory(dir))
    fail_input("{}: --out exists and is not a folder", dir);
  if (!fs::exists(dir)) {
    if (!fs::create_directories(dir, ec))
      fail_input("{}: cannot create folder: {}", dir, ec.message());
    return;
  }
  std::vector<fs::path> old;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || !is_model_file(name))
      fail_input(
          "{}: --out folder is not empty and '{}' is not part of a previous model; "
          "refusing to overwrite it",
          dir, name);
    old.push_back(entry.path());
  }
  for (const fs::path& p : old) fs::remove(p);
}

size_t stored_bytes(const TensorSpec& spec, DType dtype) {
  const DType d = spec.kind == TensorKind::kRouterBias ? DType::kF32 : dtype;
  return static_cast<size_t>(tensor::shape_numel(spec.shape)) * tensor::dtype_size(d);
}

void apply_family(ModelConfig& c, Family family) {
  c.family = family;
  c.model_type = std::string(family_name(family));
  c.rope = RopeConfig{};
  if (family == Family::kGlmMoeDsa) {
    c.rope.theta = 1e6;
    c.rms_norm_eps = 1e-5;
    c.indexer_rope_interleave = true;
    c.max_position_embeddings = 202752;
  } else {
    c.rope.theta = 1e4;
    c.rope.yarn = true;
    c.rope.factor = 40;
    c.rope.original_max_position_embeddings = 4096;
    c.rope.beta_fast = 32;
    c.rope.beta_slow = 1;
    c.rope.mscale = 1;
    c.rope.mscale_all_dim = 1;
    c.rms_norm_eps = 1e-6;
    c.indexer_rope_interleave = false;
    c.max_position_embeddings = 163840;
  }
  c.rope_interleave = true;
  c.has_indexer = family != Family::kDeepseekV3;
  c.eos_token_ids = {1};
  c.bos_token_id = 0;
  c.routed_scaling_factor = 2.5;
  c.norm_topk_prob = true;
  c.moe_layer_freq = 1;
  c.num_nextn_predict_layers = 0;
  c.tie_word_embeddings = false;
}

void set_indexer(ModelConfig& c, int64_t heads, int64_t dim, int64_t topk) {
  if (!c.has_indexer) return;
  c.index_n_heads = heads;
  c.index_head_dim = dim;
  c.index_topk = topk;
}

}  // namespace

ModelConfig preset_config(std::string_view preset, Family family) {
  ModelConfig c;
  apply_family(c, family);
  if (preset == "tiny") {  // the shapes of the golden tiny cases
    c.vocab_size = 256;
    c.hidden_size = 64;
    c.num_hidden_layers = 4;
    c.first_k_dense_replace = 1;
    c.intermediate_size = 128;
    c.num_attention_heads = 4;
    c.q_lora_rank = 32;
    c.kv_lora_rank = 32;
    c.qk_nope_head_dim = 16;
    c.qk_rope_head_dim = 8;
    c.v_head_dim = 16;
    c.n_routed_experts = 8;
    c.moe_intermediate_size = 32;
    c.num_experts_per_tok = 2;
    c.n_shared_experts = 1;
    c.n_group = family == Family::kGlmMoeDsa ? 1 : 2;
    c.topk_group = 1;
    set_indexer(c, 4, 16, 8);
  } else if (preset == "small-text") {  // tiny shapes, a vocabulary that covers DeepSeek-V3's
    c = preset_config("tiny", family);
    c.vocab_size = 129280;
    c.max_position_embeddings = 4096;
  } else if (preset == "demo") {
    c.vocab_size = 129280;
    c.hidden_size = 512;
    c.num_hidden_layers = 8;
    c.first_k_dense_replace = 2;
    c.intermediate_size = 2048;
    c.num_attention_heads = 8;
    c.q_lora_rank = 256;
    c.kv_lora_rank = 128;
    c.qk_nope_head_dim = 64;
    c.qk_rope_head_dim = 32;
    c.v_head_dim = 64;
    c.n_routed_experts = 32;
    c.num_experts_per_tok = 4;
    c.n_group = 4;
    c.topk_group = 2;
    c.n_shared_experts = 1;
    c.moe_intermediate_size = 256;
    c.max_position_embeddings = 163840;
    set_indexer(c, 4, 64, 256);
  } else if (preset == "bench-moe") {
    c.vocab_size = 32000;
    c.hidden_size = 1024;
    c.num_hidden_layers = 12;
    c.first_k_dense_replace = 1;
    c.intermediate_size = 4096;
    c.num_attention_heads = 16;
    c.q_lora_rank = 384;
    c.kv_lora_rank = 256;
    c.qk_nope_head_dim = 64;
    c.qk_rope_head_dim = 32;
    c.v_head_dim = 64;
    c.n_routed_experts = 64;
    c.num_experts_per_tok = 6;
    c.n_group = 8;
    c.topk_group = 4;
    c.n_shared_experts = 2;
    c.moe_intermediate_size = 512;
    set_indexer(c, 8, 64, 2048);
  } else {
    fail_input("unknown preset '{}' (expected tiny, small-text, demo or bench-moe)", preset);
  }
  // Validate through the parser so a preset can never drift from what loading accepts.
  return parse_config(c.to_json(), fmt::format("preset '{}'", preset));
}

MakeModelResult make_model(const MakeModelOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16)
    fail_input("make-model: unsupported dtype {} (expected f32 or bf16)",
               tensor::dtype_name(options.dtype));
  if (options.out_dir.empty()) fail_input("make-model: no output folder given");
  ModelConfig config = options.config;
  config.torch_dtype = options.dtype == DType::kF32 ? "float32" : "bfloat16";
  config.weight_block_rows = config.weight_block_cols = 0;
  const std::vector<TensorSpec> specs = checkpoint_tensors(config);

  // Plan shards first so file names can carry the shard count, as in HF.
  std::vector<std::vector<const TensorSpec*>> shards(1);
  size_t shard_bytes = 0;
  size_t total_bytes = 0;
  for (const TensorSpec& spec : specs) {
    const size_t b = stored_bytes(spec, options.dtype);
    if (shard_bytes > 0 && shard_bytes + b > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&spec);
    shard_bytes += b;
    total_bytes += b;
  }

  prepare_out_dir(options.out_dir);
  const fs::path out(options.out_dir);
  {
    std::ofstream cfg(out / "config.json");
    cfg << config.to_json().dump(2) << "\n";
    if (!cfg) fail_input("{}: cannot write config.json", options.out_dir);
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  // One scratch buffer reused for every tensor: no per-tensor allocation and page faults.
  size_t max_bytes = 0;
  for (const TensorSpec& spec : specs)
    max_bytes = std::max(max_bytes, stored_bytes(spec, options.dtype));
  std::vector<float> scratch((max_bytes + sizeof(float) - 1) / sizeof(float));
  LoadProgress progress("writing weights", total_bytes, specs.size());
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = shards.size() == 1 ? "model.safetensors"
                                                : fmt::format("model-{:05d}-of-{:05d}.safetensors",
                                                              s + 1, shards.size());
    std::vector<SafetensorsWriter::Layout> layout;
    for (const TensorSpec* spec : shards[s]) {
      const DType d = spec->kind == TensorKind::kRouterBias ? DType::kF32 : options.dtype;
      layout.push_back({spec->name, d, spec->shape});
    }
    SafetensorsWriter writer((out / file).string(), layout, metadata);
    for (size_t k = 0; k < layout.size(); ++k) {
      const SafetensorsWriter::Layout& t = layout[k];
      generate(*shards[s][k], t.dtype, options.seed, scratch.data());
      if (t.name.ends_with("self_attn.indexer.wq_b.weight"))
        make_antithetic(scratch.data(), t.dtype, config.index_n_heads, config.index_head_dim,
                        t.shape[1]);
      writer.write(t.name, scratch.data(),
                   static_cast<size_t>(tensor::shape_numel(t.shape)) * tensor::dtype_size(t.dtype));
      weight_map[t.name] = file;
      progress.advance(stored_bytes(*shards[s][k], options.dtype));
    }
    writer.close();
  }
  progress.finish();
  if (shards.size() > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total_bytes}};
    index["weight_map"] = weight_map;
    std::ofstream idx(out / "model.safetensors.index.json");
    idx << index.dump(2) << "\n";
    if (!idx) fail_input("{}: cannot write model.safetensors.index.json", options.out_dir);
  }

  MakeModelResult result;
  result.params = count_params(config);
  result.bytes = total_bytes;
  result.tensors = static_cast<int64_t>(specs.size());
  result.shards = static_cast<int64_t>(shards.size());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace handoff::model
