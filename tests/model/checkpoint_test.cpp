// Loading the golden checkpoints: layout, shapes, zero-copy views and FP8 block dequantisation.
#include "handoff/model/checkpoint.h"

#include <gtest/gtest.h>

#include <set>

#include "handoff/model/checkpoint_layout.h"
#include "test_util.h"

namespace handoff::model {
namespace {

using tensor::DType;
using testing::golden_dir;

class GoldenCheckpointTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenCheckpointTest, EveryLayoutTensorLoadsWithItsShape) {
  const std::string dir = golden_dir(GetParam());
  const ModelConfig config = load_config(dir + "/config.json");
  const Checkpoint ck = Checkpoint::open(dir, config);
  const auto specs = checkpoint_tensors(config);
  std::set<std::string> expected_names;
  for (const TensorSpec& spec : specs) {
    SCOPED_TRACE(spec.name);
    expected_names.insert(spec.name);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const tensor::Tensor t = ck.load(spec.name, spec.shape, dtype);
      EXPECT_EQ(t.shape(), spec.shape);
      EXPECT_EQ(t.dtype(), dtype);
      EXPECT_TRUE(t.is_contiguous());
    }
  }
  // The layout is exactly the checkpoint's content (FP8 scales aside).
  std::set<std::string> actual;
  for (const std::string& n : ck.names())
    if (!n.ends_with("_scale_inv")) actual.insert(n);
  EXPECT_EQ(actual, expected_names);
  EXPECT_GT(ck.total_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenCheckpointTest,
                         ::testing::Values("dsv32_tiny_sparse", "glm5_tiny_sparse",
                                           "dsv32_small_bf16", "dsv32_fp8_blocks"));

TEST(CheckpointTest, SameDtypeIsAZeroCopyView) {
  const std::string dir = golden_dir("dsv32_small_bf16");
  const ModelConfig config = load_config(dir + "/config.json");
  const Checkpoint ck = Checkpoint::open(dir, config);
  const std::string name = "model.layers.0.self_attn.q_a_proj.weight";
  const tensor::Shape shape = {64, 256};
  const auto a = ck.load(name, shape, DType::kBF16);
  const auto b = ck.load(name, shape, DType::kBF16);
  EXPECT_EQ(a.raw(), b.raw());  // both point into the mapping
  const auto f = ck.load(name, shape, DType::kF32);
  EXPECT_NE(f.raw(), a.raw());
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_EQ(f.data<float>()[i], tensor::bf16_to_f32(a.data<uint16_t>()[i]));
  // The router bias stays F32 in the bf16 checkpoint.
  const auto st = SafetensorsFile::open(dir + "/model.safetensors");
  EXPECT_EQ(st->entries().at("model.layers.1.mlp.gate.e_score_correction_bias").dtype, DType::kF32);
}

// W[i, j] = fp8[i, j] · scale_inv[i / 128, j / 128], checked by hand, including the partial
// bottom row block of kv_a_proj_with_mqa (144 rows: blocks of 128 and 16).
TEST(CheckpointTest, Fp8BlockDequantisation) {
  const std::string dir = golden_dir("dsv32_fp8_blocks");
  const ModelConfig config = load_config(dir + "/config.json");
  const Checkpoint ck = Checkpoint::open(dir, config);
  const auto st = SafetensorsFile::open(dir + "/model.safetensors");
  struct Case {
    std::string name;
    int64_t rows, cols;
  };
  for (const Case& c : {Case{"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 144, 256},
                        Case{"model.layers.1.self_attn.q_a_proj.weight", 192, 256},
                        Case{"model.layers.2.mlp.experts.3.down_proj.weight", 256, 16},
                        Case{"model.layers.0.self_attn.indexer.wq_b.weight", 128, 192}}) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(st->entries().at(c.name).dtype, DType::kF8E4M3);
    const auto raw = st->get(c.name);
    const auto scale = st->get(c.name + "_scale_inv");
    ASSERT_EQ(scale.dtype(), DType::kF32);
    const int64_t grid_cols = (c.cols + 127) / 128;
    ASSERT_EQ(scale.shape(), (tensor::Shape{(c.rows + 127) / 128, grid_cols}));
    const auto w = ck.load(c.name, {c.rows, c.cols}, DType::kF32);
    const auto wb = ck.load(c.name, {c.rows, c.cols}, DType::kBF16);
    const std::vector<std::pair<int64_t, int64_t>> points = {
        {0, 0},
        {5, 7},
        {127, 127},
        {c.rows - 1, c.cols - 1},
        {c.rows - 1, 0},
        {0, c.cols - 1},
        {std::min<int64_t>(130, c.rows - 1), std::min<int64_t>(131, c.cols - 1)}};
    for (auto [i, j] : points) {
      const float expected = tensor::f8e4m3_to_f32(raw.data<uint8_t>()[i * c.cols + j]) *
                             scale.data<float>()[(i / 128) * grid_cols + j / 128];
      EXPECT_EQ(w.data<float>()[i * c.cols + j], expected) << i << "," << j;
      // ue8m0 scales are powers of two, so bf16 is exact too.
      EXPECT_EQ(tensor::bf16_to_f32(wb.data<uint16_t>()[i * c.cols + j]), expected);
    }
  }
  // The scales differ between blocks, so a per-tensor or transposed grid would be caught.
  const auto s = st->get("model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv");
  std::set<float> distinct(s.data<float>(), s.data<float>() + s.numel());
  EXPECT_GT(distinct.size(), 1u);
}

TEST(CheckpointTest, Fp8DefaultBlockWithoutQuantizationConfig) {
  const std::string dir = golden_dir("dsv32_fp8_blocks");
  ModelConfig config = load_config(dir + "/config.json");
  config.weight_block_rows = config.weight_block_cols = 0;  // no quantization_config
  const Checkpoint ck = Checkpoint::open(dir, config);
  const auto w =
      ck.load("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", {144, 256}, DType::kF32);
  EXPECT_EQ(w.shape(), (tensor::Shape{144, 256}));
}

}  // namespace
}  // namespace handoff::model
