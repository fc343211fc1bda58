// Hostile checkpoints that used to load silently: shapes whose byte count overflows, a data
// section at an odd offset (valid, unpadded header), and NaN / Inf weights. Each is either an
// InputError naming the file and tensor, or (odd offsets) loads to exactly the same model.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "handoff/engine/generator.h"
#include "handoff/model/model.h"
#include "handoff/model/safetensors.h"
#include "test_util.h"

namespace handoff::model {
namespace {

namespace fs = std::filesystem;
using tensor::DType;
using tensor::Tensor;
using testing::expect_input_error;
using testing::golden_dir;
using testing::TempDir;

using TensorList = std::vector<std::pair<std::string, Tensor>>;

const std::string kCase = "dsv32_tiny_sparse";
const std::vector<int32_t> kPrompt = {201, 111, 173, 196, 27, 102};

TensorList golden_tensors(DType dtype) {
  const auto st = SafetensorsFile::open(golden_dir(kCase) + "/model.safetensors");
  TensorList out;
  for (const auto& [n, e] : st->entries()) out.emplace_back(n, st->get(n).to(dtype));
  return out;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out;
}

// A safetensors file whose data section starts at an odd byte: the header is compact JSON,
// not padded to 8 (the format allows any length), with one space more when its length is even.
void write_at_odd_offset(const std::string& path, const TensorList& tensors) {
  nlohmann::ordered_json header;
  std::string data;
  for (const auto& [name, t] : tensors) {
    const size_t begin = data.size();
    data.append(static_cast<const char*>(t.raw()), t.nbytes());
    header[name] = {{"dtype", t.dtype() == DType::kF32 ? "F32" : "BF16"},
                    {"shape", t.shape()},
                    {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  if (text.size() % 2 == 0) text += ' ';
  ASSERT_EQ((8 + text.size()) % 2, 1u);
  write_bytes(path, le64(text.size()) + text + data);
}

// A model folder: the golden config and `tensors`, written normally or at an odd offset.
void write_model(const TempDir& dir, const TensorList& tensors, bool odd_offset) {
  fs::copy_file(golden_dir(kCase) + "/config.json", dir.file("config.json"));
  if (odd_offset)
    write_at_odd_offset(dir.file("model.safetensors"), tensors);
  else
    write_safetensors(dir.file("model.safetensors"), tensors);
}

// Prefill logits of kPrompt and 3 greedy tokens.
engine::GenerationResult run(Model& model) {
  engine::Generator gen(model, 12);  // the prompt and 3 new tokens
  engine::Sampler sampler(0);
  engine::GenerationOptions options;
  options.max_new_tokens = 3;
  options.record = true;
  return gen.run(kPrompt, options, sampler);
}

TEST(SafetensorsLimitsTest, ShapesBeyondInt64AreErrorsNamingTheTensor) {
  TempDir dir;
  const std::string p = dir.file("x.safetensors");
  auto raw = [&](const std::string& header) {
    write_bytes(p, le64(header.size()) + header + std::string(8, '\0'));
  };
  // 2^62 x 4 elements: the unchecked product wraps to 0 bytes and matched offsets [0, 0].
  raw(R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})");
  expect_input_error([&] { SafetensorsFile::open(p); }, {p, "'w'", "more bytes"});
  // 2^62 elements of 4 bytes: fits int64 as a count, not as bytes.
  raw(R"({"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 0]}})");
  expect_input_error([&] { SafetensorsFile::open(p); }, {p, "'w'", "more bytes"});
  // 2^63 does not fit int64 at all (it read back as a negative dimension).
  raw(R"({"w": {"dtype": "BF16", "shape": [9223372036854775808], "data_offsets": [0, 0]}})");
  expect_input_error([&] { SafetensorsFile::open(p); }, {p, "'w'", "bad shape"});
  // An empty tensor whose strides would overflow.
  raw(R"({"w": {"dtype": "F32", "shape": [0, 4611686018427387904, 4], "data_offsets": [0, 0]}})");
  expect_input_error([&] { SafetensorsFile::open(p); }, {p, "'w'"});
}

TEST(SafetensorsLimitsTest, OddOffsetDataIsReadCorrectlyAndAligned) {
  TempDir dir;
  const std::vector<float> values = {1.5f, -2.25f, 3.0f, 0.0078125f, -65536.0f, 7.0f};
  Tensor w = Tensor::empty({2, 3}, DType::kBF16);
  tensor::convert_from_f32(values.data(), DType::kBF16, w.raw(), values.size());
  Tensor v = Tensor::empty({3}, DType::kF32);
  std::memcpy(v.raw(), values.data(), 3 * sizeof(float));
  const std::string p = dir.file("odd.safetensors");
  write_at_odd_offset(p, {{"b", Tensor::zeros({1}, DType::kBF16)}, {"w", w}, {"v", v}});
  const auto st = SafetensorsFile::open(p);
  for (const char* name : {"w", "v"}) {
    const Tensor t = st->get(name);
    // Kernels load typed elements: the tensor they get must be aligned for its dtype.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % tensor::dtype_size(t.dtype()), 0u) << name;
  }
  const Tensor wf = st->get("w").to(DType::kF32);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(wf.data<float>()[i], values[i]) << i;
  const Tensor vf = st->get("v");
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(vf.data<float>()[i], values[i]) << i;
  // The conversion itself reads any address (no misaligned typed load).
  std::vector<uint8_t> bytes(1 + values.size() * 2);
  std::memcpy(bytes.data() + 1, w.raw(), values.size() * 2);
  std::vector<float> out(values.size());
  tensor::convert_to_f32(DType::kBF16, bytes.data() + 1, out.data(), out.size());
  EXPECT_EQ(out, values);
}

TEST(SafetensorsLimitsTest, ModelAtOddOffsetGivesTheSameLogits) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    TempDir padded, odd;
    const TensorList tensors = golden_tensors(dtype);
    write_model(padded, tensors, false);
    write_model(odd, tensors, true);
    LoadOptions load;
    load.dtype = dtype;  // f32 from f32 and bf16 from bf16: zero-copy views of the mapping
    const auto a = run(*Model::load(padded.str(), load));
    const auto b = run(*Model::load(odd.str(), load));
    EXPECT_EQ(a.prefill_logits, b.prefill_logits) << tensor::dtype_name(dtype);
    EXPECT_EQ(a.generated, b.generated) << tensor::dtype_name(dtype);
  }
}

void set_element(TensorList& list, const std::string& name, int64_t index, float value) {
  for (auto& [n, t] : list)
    if (n == name) {
      ASSERT_LT(index, t.numel()) << name;
      t = t.contiguous();  // an owned copy, not the mapping
      tensor::convert_from_f32(
          &value, t.dtype(), static_cast<uint8_t*>(t.raw()) + index * tensor::dtype_size(t.dtype()),
          1);
      return;
    }
  FAIL() << "no tensor " << name;
}

TEST(WeightCheckTest, NanInANormWeightIsALoadErrorNamingTheTensor) {
  TempDir dir;
  TensorList tensors = golden_tensors(DType::kF32);
  set_element(tensors, "model.norm.weight", 3, std::numeric_limits<float>::quiet_NaN());
  write_model(dir, tensors, false);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    LoadOptions load;
    load.dtype = dtype;
    expect_input_error([&] { Model::load(dir.str(), load); },
                       {dir.file("model.safetensors"), "'model.norm.weight'", "nan", "element 3",
                        "--no-check-weights"});
  }
  // Skipped on request: the model loads, and its NaN logits end generation with an error
  // instead of a stream of token 0.
  LoadOptions load;
  load.check_weights = false;
  auto model = Model::load(dir.str(), load);
  try {
    run(*model);
    ADD_FAILURE() << "generation from NaN logits did not fail";
  } catch (const engine::NonFiniteLogitsError& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite logit (nan)"), std::string::npos) << e.what();
  }
}

TEST(WeightCheckTest, InfinityInEveryKindOfWeightIsFound) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight",
                           "model.layers.2.mlp.experts.5.down_proj.weight",
                           "model.layers.1.self_attn.kv_b_proj.weight",
                           "model.layers.0.self_attn.indexer.k_norm.bias"}) {
    TempDir dir;
    TensorList tensors = golden_tensors(DType::kBF16);
    set_element(tensors, name, 11, -inf);
    write_model(dir, tensors, false);
    SCOPED_TRACE(name);
    expect_input_error([&] { Model::load(dir.str(), LoadOptions{}); },
                       {std::string("'") + name + "'", "-inf", "element 11"});
  }
}

TEST(WeightCheckTest, F32BeyondBf16RangeIsFoundAfterConversion) {
  // FLT_MAX is finite in the file but rounds to Inf in a bf16 model: the loaded tensor is what
  // the scan checks.
  TempDir dir;
  TensorList tensors = golden_tensors(DType::kF32);
  const std::string qa = "model.layers.0.self_attn.q_a_proj.weight";
  set_element(tensors, qa, 5, std::numeric_limits<float>::max());
  write_model(dir, tensors, false);
  LoadOptions f32;
  f32.dtype = DType::kF32;
  EXPECT_NO_THROW(Model::load(dir.str(), f32));
  expect_input_error([&] { Model::load(dir.str(), LoadOptions{}); }, {"'" + qa + "'", "inf"});
}

}  // namespace
}  // namespace handoff::model
