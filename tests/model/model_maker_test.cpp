// make-model round trips: write a preset, then open and load every tensor of its layout.
#include "handoff/model/model_maker.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "handoff/model/checkpoint.h"
#include "test_util.h"

namespace handoff::model {
namespace {

namespace fs = std::filesystem;
using tensor::DType;
using testing::TempDir;

void load_all(const std::string& dir, const ModelConfig& expected, DType stored) {
  const ModelConfig config = load_config(dir + "/config.json");
  EXPECT_EQ(config.to_json().dump(), expected.to_json().dump());
  const Checkpoint ck = Checkpoint::open(dir, config);
  const auto specs = checkpoint_tensors(config);
  EXPECT_EQ(ck.names().size(), specs.size());
  for (const TensorSpec& spec : specs) {
    SCOPED_TRACE(spec.name);
    const auto t = ck.load(spec.name, spec.shape, DType::kF32);
    EXPECT_EQ(t.shape(), spec.shape);
    // Loading in the stored dtype is a view; the router bias is stored in F32.
    const DType d = spec.kind == TensorKind::kRouterBias ? DType::kF32 : stored;
    EXPECT_EQ(ck.load(spec.name, spec.shape, d).dtype(), d);
  }
}

MakeModelOptions options_for(std::string_view preset, Family family, DType dtype,
                             const std::string& out, uint64_t seed = 7) {
  MakeModelOptions o;
  o.config = preset_config(preset, family);
  o.dtype = dtype;
  o.out_dir = out;
  o.seed = seed;
  return o;
}

TEST(ModelMakerTest, TinyRoundTripEveryFamily) {
  for (Family f : {Family::kGlmMoeDsa, Family::kDeepseekV32, Family::kDeepseekV3}) {
    for (DType d : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(std::string(family_name(f)) + " " + std::string(tensor::dtype_name(d)));
      TempDir dir;
      MakeModelOptions o = options_for("tiny", f, d, dir.file("m"));
      const MakeModelResult r = make_model(o);
      EXPECT_EQ(r.shards, 1);
      o.config.torch_dtype = d == DType::kF32 ? "float32" : "bfloat16";
      load_all(dir.file("m"), o.config, d);
    }
  }
}

TEST(ModelMakerTest, TinyMatchesGoldenShapes) {
  const ModelConfig golden = load_config(testing::golden_dir("dsv32_tiny_sparse") + "/config.json");
  ModelConfig tiny = preset_config("tiny", Family::kDeepseekV32);
  tiny.torch_dtype = golden.torch_dtype;
  EXPECT_EQ(tiny.to_json().dump(), golden.to_json().dump());
  const ModelConfig glm_golden =
      load_config(testing::golden_dir("glm5_tiny_sparse") + "/config.json");
  ModelConfig glm = preset_config("tiny", Family::kGlmMoeDsa);
  glm.torch_dtype = glm_golden.torch_dtype;
  EXPECT_EQ(glm.to_json().dump(), glm_golden.to_json().dump());
  EXPECT_FALSE(preset_config("tiny", Family::kDeepseekV3).has_indexer);
}

TEST(ModelMakerTest, DeterministicAntitheticAndScaled) {
  TempDir dir;
  make_model(options_for("tiny", Family::kDeepseekV32, DType::kF32, dir.file("a"), 11));
  make_model(options_for("tiny", Family::kDeepseekV32, DType::kF32, dir.file("b"), 11));
  make_model(options_for("tiny", Family::kDeepseekV32, DType::kF32, dir.file("c"), 12));
  auto bytes = [&](const std::string& sub) {
    std::ifstream in(dir.file(sub + "/model.safetensors"), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes("a"), bytes("b"));
  EXPECT_NE(bytes("a"), bytes("c"));

  const auto st = SafetensorsFile::open(dir.file("a/model.safetensors"));
  const auto wq = st->get("model.layers.2.self_attn.indexer.wq_b.weight");  // [4*16, 32]
  const float* w = wq.data<float>();
  const int64_t head = 16 * 32;
  for (int64_t i = 0; i < head; ++i) {
    EXPECT_EQ(w[head + i], -w[i]);
    EXPECT_EQ(w[3 * head + i], -w[2 * head + i]);
  }
  EXPECT_NE(w[2 * head], w[0]);
  auto stddev = [](const tensor::Tensor& t) {
    double s = 0, s2 = 0;
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) s += p[i], s2 += double(p[i]) * p[i];
    const double m = s / t.numel();
    return std::sqrt(s2 / t.numel() - m * m);
  };
  EXPECT_NEAR(stddev(st->get("model.embed_tokens.weight")), 1.0, 0.05);
  EXPECT_NEAR(stddev(st->get("model.layers.1.mlp.experts.0.down_proj.weight")),
              1.0 / std::sqrt(32.0), 0.02);
  const auto norm = st->get("model.layers.1.input_layernorm.weight");
  for (int64_t i = 0; i < norm.numel(); ++i) EXPECT_NEAR(norm.data<float>()[i], 1.0f, 0.02f);
}

TEST(ModelMakerTest, ShardsWithIndexJson) {
  TempDir dir;
  MakeModelOptions o = options_for("tiny", Family::kGlmMoeDsa, DType::kBF16, dir.file("m"));
  o.max_shard_bytes = 100 * 1024;
  const MakeModelResult r = make_model(o);
  EXPECT_GT(r.shards, 2);
  EXPECT_TRUE(fs::exists(dir.file("m/model.safetensors.index.json")));
  EXPECT_FALSE(fs::exists(dir.file("m/model.safetensors")));
  o.config.torch_dtype = "bfloat16";
  load_all(dir.file("m"), o.config, DType::kBF16);
  // Rewriting a previous model into the same folder is allowed and leaves no stale shards.
  o.max_shard_bytes = size_t{1} << 30;
  make_model(o);
  EXPECT_TRUE(fs::exists(dir.file("m/model.safetensors")));
  EXPECT_FALSE(fs::exists(dir.file("m/model.safetensors.index.json")));
  EXPECT_FALSE(fs::exists(dir.file("m/model-00001-of-00002.safetensors")));
  load_all(dir.file("m"), o.config, DType::kBF16);
}

TEST(ModelMakerTest, RefusesForeignFiles) {
  TempDir dir;
  std::ofstream(dir.file("notes.txt")) << "x";
  testing::expect_input_error(
      [&] { make_model(options_for("tiny", Family::kDeepseekV32, DType::kF32, dir.str())); },
      {dir.str(), "notes.txt"});
  testing::expect_input_error([] { preset_config("huge", Family::kDeepseekV32); }, {"huge"});
}

TEST(ModelMakerTest, DemoRoundTrip) {
  TempDir dir;
  MakeModelOptions o = options_for("demo", Family::kDeepseekV32, DType::kBF16, dir.file("m"));
  make_model(o);
  o.config.torch_dtype = "bfloat16";
  load_all(dir.file("m"), o.config, DType::kBF16);
  EXPECT_EQ(o.config.vocab_size, 129280);
  EXPECT_EQ(o.config.index_topk, 256);
}

TEST(ModelMakerTest, BenchMoeParamCounts) {
  const ParamCounts v3 = count_params(preset_config("bench-moe", Family::kDeepseekV3));
  EXPECT_EQ(v3.total, 1254982848);
  EXPECT_EQ(v3.active_per_token, 218727616);
  const ModelConfig v32 = preset_config("bench-moe", Family::kDeepseekV32);
  EXPECT_EQ(v32.index_n_heads, 8);
  EXPECT_EQ(v32.index_head_dim, 64);
  EXPECT_EQ(v32.index_topk, 2048);
  EXPECT_GT(count_params(v32).total, v3.total);
}

}  // namespace
}  // namespace handoff::model
