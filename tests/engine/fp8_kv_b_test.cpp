// An FP8 kv_b_proj stays FP8 at load: per head, W_UV is a slice of its blocks and W_UK^T their
// transpose. The golden checkpoints' qk_nope (16-32) would pad W_UK^T to a whole 128-column
// block, so they hold it dense; this config's (96, heads starting inside blocks) keeps it FP8,
// and the logits must equal exact f32 math on the same weights quantised and dequantised.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "golden_support.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/mla_attention.h"
#include "handoff/model/model_maker.h"
#include "handoff/model/safetensors.h"
#include "handoff/tensor/fp8_blocks.h"

namespace handoff::testing {
namespace {

namespace fs = std::filesystem;

TEST(Fp8KvB, HeadsKeptFp8MatchExactMathOnDequantisedWeights) {
  model::ModelConfig c = model::preset_config("tiny", model::Family::kDeepseekV32);
  c.qk_nope_head_dim = 96;
  c.v_head_dim = 48;     // 144 rows a head: heads 1-3 start 16, 32 and 48 rows into a block
  c.kv_lora_rank = 160;  // W_UV's K spans a block and a part
  // The path under test at f32: no head takes the dense fallback. (At bf16 head 3's 96 columns,
  // 48 into a block, would pad to 256 bytes a row against 192 dense, and it would.)
  for (int64_t h = 0; h < c.num_attention_heads; ++h)
    ASSERT_TRUE(model::MlaAttention::keeps_uk_t_fp8(h * 144, 96, 128, 4)) << h;
  EXPECT_FALSE(model::MlaAttention::keeps_uk_t_fp8(3 * 144, 96, 128, 2));
  EXPECT_TRUE(model::MlaAttention::keeps_uk_t_fp8(0, 96, 128, 2));
  EXPECT_FALSE(model::MlaAttention::keeps_uk_t_fp8(0, 64, 128, 2));  // bench-moe: dense
  const fs::path root = fs::temp_directory_path() / "handoff_fp8_kv_b";
  fs::remove_all(root);
  model::MakeModelOptions make;
  make.config = c;
  make.seed = 11;
  make.dtype = tensor::DType::kF32;
  make.out_dir = (root / "f32").string();
  model::make_model(make);

  // The same checkpoint with every quantisable matrix replaced by its FP8 blocks, dequantised.
  const fs::path dequantised = root / "dequantised";
  fs::create_directories(dequantised);
  fs::copy_file(root / "f32" / "config.json", dequantised / "config.json");
  const std::set<std::string> matrices = model::Checkpoint::fp8_quantisable(c);
  ASSERT_EQ(matrices.count("model.layers.0.self_attn.kv_b_proj.weight"), 1u);
  const auto file = model::SafetensorsFile::open((root / "f32" / "model.safetensors").string());
  std::vector<std::pair<std::string, tensor::Tensor>> tensors;
  for (const auto& [name, entry] : file->entries()) {
    const tensor::Tensor t = file->get(name);
    tensors.emplace_back(name,
                         matrices.count(name) ? tensor::quantize_fp8_blocks(t).dequantize() : t);
  }
  model::write_safetensors((dequantised / "model.safetensors").string(), tensors);

  model::LoadOptions exact;
  exact.dtype = tensor::DType::kF32;
  auto reference = model::Model::load(dequantised.string(), exact);
  model::LoadOptions quantize = exact;
  quantize.quantize_fp8 = true;
  auto fp8 = model::Model::load((root / "f32").string(), quantize);
  ASSERT_TRUE(fp8->fp8_weights());

  nlohmann::json prompt;
  prompt["tokens"] = {5, 17, 99, 3, 42, 7, 200, 11, 64, 130};
  prompt["greedy_tokens"] = {8, 250, 31, 77, 2};
  const auto a = run_teacher_forced(*reference, prompt);
  const auto b = run_teacher_forced(*fp8, prompt);
  const nlohmann::json b_prefill = b.prefill_logits, b_decode = b.decode_logits;
  EXPECT_LE(max_abs_diff(a.prefill_logits, b_prefill), 1e-4);
  EXPECT_LE(max_abs_diff(a.decode_logits, b_decode), 1e-4);
  EXPECT_EQ(a.generated, b.generated);
  // A wrong scale or transpose moves logits by far more than that bound: the same weights
  // without quantisation are another model.
  auto unquantised = model::Model::load((root / "f32").string(), exact);
  const nlohmann::json c_decode = run_teacher_forced(*unquantised, prompt).decode_logits;
  EXPECT_GT(max_abs_diff(a.decode_logits, c_decode), 1e-3);
  fs::remove_all(root);
}

}  // namespace
}  // namespace handoff::testing
