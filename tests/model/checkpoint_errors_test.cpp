// Malformed checkpoints written into a temp folder: every one must be an InputError naming the
// file and the tensor (or field) at fault.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "handoff/model/checkpoint.h"
#include "handoff/model/checkpoint_layout.h"
#include "test_util.h"

namespace handoff::model {
namespace {

namespace fs = std::filesystem;
using tensor::DType;
using testing::expect_input_error;
using testing::golden_dir;
using testing::TempDir;

using TensorList = std::vector<std::pair<std::string, tensor::Tensor>>;

// The golden case's tensors (views of its mapping), to be edited and written elsewhere.
TensorList golden_tensors(const std::string& name) {
  const auto st = SafetensorsFile::open(golden_dir(name) + "/model.safetensors");
  TensorList out;
  for (const auto& [n, e] : st->entries()) out.emplace_back(n, st->get(n));
  return out;
}

// A copy of golden case `name` in `dir` with its tensors edited by `edit`.
ModelConfig write_edited(const TempDir& dir, const std::string& name,
                         const std::function<void(TensorList&)>& edit) {
  fs::copy_file(golden_dir(name) + "/config.json", dir.file("config.json"));
  TensorList tensors = golden_tensors(name);
  edit(tensors);
  write_safetensors(dir.file("model.safetensors"), tensors);
  return load_config(dir.file("config.json"));
}

void erase_tensor(TensorList& list, const std::string& name) {
  std::erase_if(list, [&](const auto& p) { return p.first == name; });
}
void replace_tensor(TensorList& list, const std::string& name, tensor::Tensor t) {
  for (auto& p : list)
    if (p.first == name) p.second = std::move(t);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A raw safetensors file from a header text and `data_bytes` zero bytes.
std::string raw_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + std::string(data_bytes, '\0');
}

const char kQa[] = "model.layers.0.self_attn.q_a_proj.weight";

TEST(CheckpointErrorsTest, MissingTensor) {
  TempDir dir;
  const ModelConfig c =
      write_edited(dir, "dsv32_tiny_sparse", [](TensorList& l) { erase_tensor(l, kQa); });
  const Checkpoint ck = Checkpoint::open(dir.str(), c);
  expect_input_error([&] { ck.load(kQa, {32, 64}, DType::kF32); }, {kQa, dir.str(), "missing"});
}

TEST(CheckpointErrorsTest, WrongShape) {
  TempDir dir;
  const ModelConfig c = write_edited(dir, "dsv32_tiny_sparse", [](TensorList& l) {
    replace_tensor(l, kQa, tensor::Tensor::zeros({64, 32}, DType::kF32));
  });
  const Checkpoint ck = Checkpoint::open(dir.str(), c);
  expect_input_error(
      [&] {
        ck.load(kQa, {32, 64}, DType::kF32);
      },
      {dir.file("model.safetensors"), kQa, "[64, 32]", "[32, 64]"});
}

TEST(CheckpointErrorsTest, IntegerWeight) {
  TempDir dir;
  const ModelConfig c = write_edited(dir, "dsv32_tiny_sparse", [](TensorList& l) {
    replace_tensor(l, kQa, tensor::Tensor::zeros({32, 64}, DType::kI32));
  });
  const Checkpoint ck = Checkpoint::open(dir.str(), c);
  expect_input_error(
      [&] {
        ck.load(kQa, {32, 64}, DType::kF32);
      },
      {dir.file("model.safetensors"), kQa, "i32"});
}

TEST(CheckpointErrorsTest, TruncatedFile) {
  TempDir dir;
  const std::string src = golden_dir("dsv32_tiny_sparse") + "/model.safetensors";
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() / 2);
  write_bytes(dir.file("model.safetensors"), bytes);
  expect_input_error([&] { SafetensorsFile::open(dir.file("model.safetensors")); },
                     {dir.file("model.safetensors"), "model.layers.", "truncated"});
  const ModelConfig c = load_config(golden_dir("dsv32_tiny_sparse") + "/config.json");
  expect_input_error([&] { Checkpoint::open(dir.str(), c); }, {dir.file("model.safetensors")});
}

TEST(CheckpointErrorsTest, HeaderProblems) {
  TempDir dir;
  const std::string p = dir.file("x.safetensors");
  auto open = [&] { SafetensorsFile::open(p); };
  write_bytes(p, "abc");
  expect_input_error(open, {p, "shorter than"});
  std::string big = raw_file("{}", 0);
  big[2] = 1;  // header length 65536 + 2 in a 10-byte file
  write_bytes(p, big);
  expect_input_error(open, {p, "header length", "beyond the file size"});
  write_bytes(p, raw_file("{\"a\": {\"dtype\": ", 8));
  expect_input_error(open, {p, "invalid JSON"});
  write_bytes(p, raw_file(R"({"w": {"dtype": "F32", "shape": [2]}})", 8));
  expect_input_error(open, {p, "'w'", "data_offsets"});
  write_bytes(p, raw_file(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8));
  expect_input_error(open, {p, "'w'", "F64"});
  write_bytes(p,
              raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 1000]}})", 8));
  expect_input_error(open, {p, "'w'", "[0, 1000]", "beyond"});
  write_bytes(p, raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8));
  expect_input_error(open, {p, "'w'", "end before begin"});
  write_bytes(p, raw_file(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8));
  expect_input_error(open, {p, "'w'", "needs 12 bytes"});
  write_bytes(p, raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                          R"( "v": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                          8));
  expect_input_error(open, {p, "overlaps"});
  // A number past double's range is nlohmann's out_of_range, not a parse_error (found by the
  // safetensors fuzzer): still an InputError naming the file.
  write_bytes(p,
              raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8e999]}})", 8));
  expect_input_error(open, {p, "invalid JSON header", "number overflow"});
}

TEST(CheckpointErrorsTest, ConfigNumberPastDoubleRangeIsAnInputError) {
  TempDir dir;
  std::ifstream in(golden_dir("dsv32_tiny_sparse") + "/config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string field = "\"max_position_embeddings\":";
  const size_t at = text.find(field);
  ASSERT_NE(at, std::string::npos);
  text.insert(at + field.size(), " 16e3840, \"unused\":");
  write_bytes(dir.file("config.json"), text);
  expect_input_error([&] { load_config(dir.file("config.json")); },
                     {dir.file("config.json"), "invalid JSON", "number overflow"});
}

TEST(CheckpointErrorsTest, NoWeightsInFolder) {
  TempDir dir;
  const ModelConfig c = load_config(golden_dir("dsv32_tiny_sparse") + "/config.json");
  expect_input_error([&] { Checkpoint::open(dir.str(), c); }, {dir.str(), "no weights"});
  expect_input_error([&] { Checkpoint::open(dir.file("absent"), c); }, {"absent"});
}

TEST(CheckpointErrorsTest, MissingShardFile) {
  TempDir dir;
  fs::copy_file(golden_dir("dsv32_tiny_sparse") + "/model.safetensors",
                dir.file("model-00001-of-00002.safetensors"));
  std::ofstream(dir.file("model.safetensors.index.json"))
      << R"({"metadata": {}, "weight_map": {)"
      << R"("model.embed_tokens.weight": "model-00001-of-00002.safetensors",)"
      << R"("lm_head.weight": "model-00002-of-00002.safetensors"}})";
  const ModelConfig c = load_config(golden_dir("dsv32_tiny_sparse") + "/config.json");
  expect_input_error([&] { Checkpoint::open(dir.str(), c); },
                     {"model-00002-of-00002.safetensors", "does not exist"});
}

TEST(CheckpointErrorsTest, Fp8WithoutScale) {
  TempDir dir;
  const std::string w = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight";
  const ModelConfig c = write_edited(dir, "dsv32_fp8_blocks",
                                     [&](TensorList& l) { erase_tensor(l, w + "_scale_inv"); });
  const Checkpoint ck = Checkpoint::open(dir.str(), c);
  expect_input_error([&] { ck.load(w, {144, 256}, DType::kF32); }, {w + "_scale_inv", w});
}

TEST(CheckpointErrorsTest, Fp8ScaleWithWrongGrid) {
  TempDir dir;
  const std::string w = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight";
  const ModelConfig c = write_edited(dir, "dsv32_fp8_blocks", [&](TensorList& l) {
    replace_tensor(l, w + "_scale_inv", tensor::Tensor::zeros({1, 2}, DType::kF32));
  });
  const Checkpoint ck = Checkpoint::open(dir.str(), c);
  expect_input_error(
      [&] {
        ck.load(w, {144, 256}, DType::kF32);
      },
      {dir.file("model.safetensors"), w + "_scale_inv", "[1, 2]", "[2, 2]"});
}

// The CLI turns bad flags and folders into exit code 2 with a message.
int run_cli(const std::string& args, std::string* output) {
  const std::string cmd = std::string(HANDOFF_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe) != nullptr) *output += buf;
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(MakeModelCliTest, BadFlagsExitWithInputError) {
  TempDir dir;
  std::string out;
  EXPECT_EQ(run_cli("make-model --preset huge --out " + dir.file("m"), &out), 2);
  EXPECT_NE(out.find("huge"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(run_cli("make-model --preset tiny --family llama --out " + dir.file("m"), &out), 2);
  EXPECT_NE(out.find("llama"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(run_cli("make-model --preset tiny --dtype f16 --out " + dir.file("m"), &out), 2);
  EXPECT_NE(out.find("f16"), std::string::npos) << out;
  out.clear();
  std::ofstream(dir.file("notes.txt")) << "keep me";
  EXPECT_EQ(run_cli("make-model --preset tiny --out " + dir.str(), &out), 2);
  EXPECT_NE(out.find("notes.txt"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir.file("notes.txt")));
  out.clear();
  EXPECT_EQ(run_cli("make-model --preset tiny --family glm_moe_dsa --seed 3 --dtype f32 --out " +
                        dir.file("m"),
                    &out),
            0)
      << out;
  EXPECT_NE(out.find("total params"), std::string::npos) << out;
  EXPECT_NE(out.find("active params per token"), std::string::npos) << out;
}

}  // namespace
}  // namespace handoff::model

namespace handoff::model {
namespace {

// MTP layers (index >= num_hidden_layers) are present in real checkpoints and are skipped.
TEST(CheckpointTest, MtpLayersAreTolerated) {
  TempDir dir;
  const ModelConfig c = write_edited(dir, "dsv32_tiny_sparse", [](TensorList& l) {
    l.emplace_back("model.layers.4.eh_proj.weight", tensor::Tensor::zeros({64, 128}, DType::kF32));
  });
  const Checkpoint ck = Checkpoint::open(dir.str(), c);
  EXPECT_TRUE(ck.has("model.layers.4.eh_proj.weight"));
  EXPECT_EQ(ck.load(kQa, {32, 64}, DType::kF32).shape(), (tensor::Shape{32, 64}));
}

}  // namespace
}  // namespace handoff::model
