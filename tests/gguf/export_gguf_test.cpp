// `handoff export-gguf`: the file's structure (read back by an independent GGUF parser), the
// metadata llama.cpp's deepseek2 / deepseek32 loaders read, and every tensor's bytes against the
// checkpoint it came from, including the stacked experts and the kv_b -> k_b / v_b split.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "../cli/cli_support.h"
#include "../model/test_util.h"
#include "../text/text_test_support.h"
#include "gguf_reader.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/checkpoint_layout.h"
#include "handoff/model/config.h"

namespace handoff::testing {
namespace {

using model::testing::golden_dir;
using model::testing::TempDir;
namespace fs = std::filesystem;

constexpr uint32_t kU32 = 4, kF32 = 6, kBool = 7, kString = 8, kArray = 9;
constexpr uint32_t kTypeF32 = 0, kTypeBF16 = 30;

void make_model(const std::string& family, const std::string& preset, const std::string& dtype,
                const std::string& out, const std::string& extra = "") {
  const auto r = run_handoff("make-model --family " + family + " --preset " + preset +
                             " --seed 3 --dtype " + dtype + " --out " + out + " " + extra);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

GgufFile export_and_read(const std::string& model, const std::string& out,
                         const std::string& extra = "") {
  const auto r = run_handoff("export-gguf --model " + model + " --out " + out + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + out), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + ".partial"));
  return read_gguf(out);
}

uint32_t u32(const GgufFile& g, const std::string& key) {
  const auto it = g.kv.find(key);
  if (it == g.kv.end()) {
    ADD_FAILURE() << "missing key " << key;
    return 0;
  }
  EXPECT_EQ(it->second.type, kU32) << key;
  return static_cast<uint32_t>(it->second.i);
}

double f32(const GgufFile& g, const std::string& key) {
  const auto it = g.kv.find(key);
  if (it == g.kv.end()) {
    ADD_FAILURE() << "missing key " << key;
    return 0;
  }
  EXPECT_EQ(it->second.type, kF32) << key;
  return it->second.f;
}

std::string str(const GgufFile& g, const std::string& key) {
  const auto it = g.kv.find(key);
  if (it == g.kv.end()) {
    ADD_FAILURE() << "missing key " << key;
    return "";
  }
  EXPECT_EQ(it->second.type, kString) << key;
  return it->second.s;
}

// The checkpoint's tensor `name` in dtype (f32 or bf16) as raw bytes.
std::string source_bytes(const model::Checkpoint& ck, const std::string& name,
                         const tensor::Shape& shape, tensor::DType dtype) {
  const tensor::Tensor t = ck.load(name, shape, dtype);
  return std::string(static_cast<const char*>(t.raw()), t.nbytes());
}

// Every GGUF tensor equals the checkpoint's: 1:1 tensors byte for byte, stacked experts slice by
// slice, attn_k_b[h] = (kv_b rows of head h's keys)^T, attn_v_b[h] = kv_b rows of its values.
void expect_data_matches(const GgufFile& g, const std::string& dir, tensor::DType main) {
  const model::ModelConfig c = model::load_config(dir + "/config.json");
  const model::Checkpoint ck = model::Checkpoint::open(dir, c);
  size_t expected_tensors = 0;
  const std::map<std::string, std::string> renames = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  for (const model::TensorSpec& s : model::checkpoint_tensors(c)) {
    const bool f32_kind =
        s.kind != model::TensorKind::kMatrix && s.kind != model::TensorKind::kEmbedding;
    const tensor::DType dt = f32_kind ? tensor::DType::kF32 : main;
    const uint32_t gt = dt == tensor::DType::kF32 ? kTypeF32 : kTypeBF16;
    const size_t es = tensor::dtype_size(dt);
    if (s.expert >= 0) {
      const std::string proj = s.name.substr(s.name.rfind('.', s.name.size() - 8) + 1);
      const std::string kind = proj.substr(0, proj.find('_'));
      const GgufTensor& t =
          g.tensor("blk." + std::to_string(s.layer) + ".ffn_" + kind + "_exps.weight");
      if (s.expert == 0) ++expected_tensors;
      EXPECT_EQ(t.type, gt) << t.name;
      ASSERT_EQ(t.ne, (std::vector<uint64_t>{uint64_t(s.shape[1]), uint64_t(s.shape[0]),
                                             uint64_t(c.n_routed_experts)}))
          << t.name;
      const std::string src = source_bytes(ck, s.name, s.shape, dt);
      EXPECT_EQ(std::memcmp(g.data(t) + s.expert * src.size(), src.data(), src.size()), 0)
          << t.name << " expert " << s.expert;
      continue;
    }
    if (s.name.ends_with("kv_b_proj.weight")) {
      expected_tensors += 2;
      const std::string blk = "blk." + std::to_string(s.layer);
      const GgufTensor& k = g.tensor(blk + ".attn_k_b.weight");
      const GgufTensor& v = g.tensor(blk + ".attn_v_b.weight");
      const uint64_t H = c.num_attention_heads, nope = c.qk_nope_head_dim, vd = c.v_head_dim,
                     r = c.kv_lora_rank;
      ASSERT_EQ(k.ne, (std::vector<uint64_t>{nope, r, H}));
      ASSERT_EQ(v.ne, (std::vector<uint64_t>{r, vd, H}));
      EXPECT_EQ(k.type, gt);
      EXPECT_EQ(v.type, gt);
      const std::string src = source_bytes(ck, s.name, s.shape, dt);
      size_t bad = 0;
      for (uint64_t h = 0; h < H; ++h) {
        for (uint64_t i = 0; i < nope; ++i)
          for (uint64_t j = 0; j < r; ++j)
            bad += std::memcmp(g.data(k) + ((h * r + j) * nope + i) * es,
                               src.data() + ((h * (nope + vd) + i) * r + j) * es, es) != 0;
        for (uint64_t i = 0; i < vd; ++i)
          for (uint64_t j = 0; j < r; ++j)
            bad += std::memcmp(g.data(v) + ((h * vd + i) * r + j) * es,
                               src.data() + ((h * (nope + vd) + nope + i) * r + j) * es, es) != 0;
      }
      EXPECT_EQ(bad, 0u) << blk << " k_b / v_b elements differ from kv_b_proj";
      continue;
    }
    ++expected_tensors;
    std::string name;
    if (renames.count(s.name)) {
      name = renames.at(s.name);
    } else {
      // Only the names the writer cannot get wrong silently: look the tensor up by the
      // llama.cpp names spelled out here.
      static const std::map<std::string, std::string> suffixes = {
          {"input_layernorm.weight", "attn_norm.weight"},
          {"post_attention_layernorm.weight", "ffn_norm.weight"},
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
          {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"}};
      const std::string prefix = "model.layers." + std::to_string(s.layer) + ".";
      ASSERT_TRUE(s.name.starts_with(prefix)) << s.name;
      name = "blk." + std::to_string(s.layer) + "." + suffixes.at(s.name.substr(prefix.size()));
    }
    const GgufTensor& t = g.tensor(name);
    EXPECT_EQ(t.type, gt) << name;
    std::vector<uint64_t> ne(s.shape.rbegin(), s.shape.rend());
    ASSERT_EQ(t.ne, ne) << name;
    const std::string src = source_bytes(ck, s.name, s.shape, dt);
    ASSERT_EQ(t.nbytes, src.size()) << name;
    EXPECT_EQ(std::memcmp(g.data(t), src.data(), src.size()), 0) << name << " differs";
  }
  EXPECT_EQ(g.tensors.size(), expected_tensors);
  // The data section holds exactly the tensors, each padded to the alignment.
  const GgufTensor& last = g.tensors.back();
  EXPECT_EQ(g.bytes.size(), g.data_start + (last.offset + last.nbytes + 31) / 32 * 32);
}

TEST(ExportGguf, DeepseekV32F32StructureMetadataAndData) {
  TempDir tmp;
  make_model("deepseek_v32", "tiny", "f32", tmp.file("m"));
  const GgufFile g = export_and_read(tmp.file("m"), tmp.file("m.gguf"));
  EXPECT_EQ(g.kv_count, g.kv.size());
  EXPECT_EQ(str(g, "general.architecture"), "deepseek32");
  EXPECT_EQ(str(g, "general.name"), "m");
  EXPECT_EQ(u32(g, "general.file_type"), 0u);  // all F32
  const std::string a = "deepseek32.";
  // tiny: 4 layers, hidden 64, 4 heads, q_lora 32, kv_lora 32, nope 16, rope 8, v 16, 8 experts
  EXPECT_EQ(u32(g, a + "block_count"), 4u);
  EXPECT_EQ(u32(g, a + "embedding_length"), 64u);
  EXPECT_EQ(u32(g, a + "feed_forward_length"), 128u);
  EXPECT_EQ(u32(g, a + "attention.head_count"), 4u);
  EXPECT_EQ(u32(g, a + "attention.head_count_kv"), 1u);
  EXPECT_EQ(u32(g, a + "attention.q_lora_rank"), 32u);
  EXPECT_EQ(u32(g, a + "attention.kv_lora_rank"), 32u);
  EXPECT_EQ(u32(g, a + "attention.key_length"), 40u);    // kv_lora + rope
  EXPECT_EQ(u32(g, a + "attention.value_length"), 32u);  // kv_lora
  EXPECT_EQ(u32(g, a + "attention.key_length_mla"), 24u);
  EXPECT_EQ(u32(g, a + "attention.value_length_mla"), 16u);
  EXPECT_EQ(u32(g, a + "rope.dimension_count"), 8u);
  EXPECT_EQ(u32(g, a + "expert_count"), 8u);
  EXPECT_EQ(u32(g, a + "expert_used_count"), 2u);
  EXPECT_EQ(u32(g, a + "expert_shared_count"), 1u);
  EXPECT_EQ(u32(g, a + "expert_feed_forward_length"), 32u);
  EXPECT_EQ(u32(g, a + "expert_group_count"), 2u);
  EXPECT_EQ(u32(g, a + "expert_group_used_count"), 1u);
  EXPECT_EQ(u32(g, a + "expert_gating_func"), 2u);  // sigmoid
  EXPECT_EQ(u32(g, a + "leading_dense_block_count"), 1u);
  EXPECT_EQ(u32(g, a + "vocab_size"), 256u);
  EXPECT_EQ(u32(g, a + "attention.indexer.head_count"), 4u);
  EXPECT_EQ(u32(g, a + "attention.indexer.key_length"), 16u);
  EXPECT_EQ(u32(g, a + "attention.indexer.top_k"), 8u);
  EXPECT_EQ(u32(g, a + "nextn_predict_layers"), 0u);
  const model::ModelConfig c = model::load_config(tmp.file("m") + "/config.json");
  EXPECT_FLOAT_EQ(f32(g, a + "expert_weights_scale"), float(c.routed_scaling_factor));
  EXPECT_FLOAT_EQ(f32(g, a + "attention.layer_norm_rms_epsilon"), float(c.rms_norm_eps));
  EXPECT_FLOAT_EQ(f32(g, a + "rope.freq_base"), float(c.rope.theta));
  ASSERT_TRUE(g.kv.count(a + "expert_weights_norm"));
  EXPECT_EQ(g.kv.at(a + "expert_weights_norm").type, kBool);
  EXPECT_EQ(g.kv.at(a + "expert_weights_norm").i, c.norm_topk_prob ? 1 : 0);
  EXPECT_EQ(str(g, "tokenizer.ggml.model"), "none");  // make-model writes no tokenizer
  expect_data_matches(g, tmp.file("m"), tensor::DType::kF32);
}

TEST(ExportGguf, DeepseekV3Bf16KeepsMatricesBf16AndSmallTensorsF32) {
  TempDir tmp;
  make_model("deepseek_v3", "tiny", "bf16", tmp.file("m"));
  const GgufFile g = export_and_read(tmp.file("m"), tmp.file("m.gguf"));
  EXPECT_EQ(str(g, "general.architecture"), "deepseek2");
  EXPECT_EQ(u32(g, "general.file_type"), 32u);  // mostly BF16
  for (const auto& [key, v] : g.kv) EXPECT_EQ(key.find("indexer"), std::string::npos) << key;
  EXPECT_EQ(g.index.count("blk.0.indexer.proj.weight"), 0u);
  EXPECT_EQ(g.tensor("blk.1.ffn_gate_inp.weight").type, kTypeF32);
  EXPECT_EQ(g.tensor("blk.1.exp_probs_b.bias").type, kTypeF32);
  EXPECT_EQ(g.tensor("blk.1.ffn_up_exps.weight").type, kTypeBF16);
  expect_data_matches(g, tmp.file("m"), tensor::DType::kBF16);
  // --dtype f32 widens the matrices exactly.
  const GgufFile w = export_and_read(tmp.file("m"), tmp.file("w.gguf"), "--dtype f32");
  EXPECT_EQ(u32(w, "general.file_type"), 0u);
  expect_data_matches(w, tmp.file("m"), tensor::DType::kF32);
}

TEST(ExportGguf, Fp8CheckpointIsDequantisedThroughItsBlockScales) {
  TempDir tmp;
  const GgufFile g =
      export_and_read(golden_dir("dsv32_fp8_blocks"), tmp.file("fp8.gguf"), "--dtype f32");
  // Checkpoint::load dequantises e4m3 x weight_scale_inv; the file must hold those values.
  expect_data_matches(g, golden_dir("dsv32_fp8_blocks"), tensor::DType::kF32);
  const GgufFile b = export_and_read(golden_dir("dsv32_fp8_blocks"), tmp.file("auto.gguf"));
  EXPECT_EQ(u32(b, "general.file_type"), 32u);  // auto: FP8 -> bf16
}

TEST(ExportGguf, DeepseekTokenizerBecomesGpt2Vocabulary) {
  if (!require_node_modules()) return;
  TempDir tmp;
  make_model("deepseek_v3", "small-text", "bf16", tmp.file("m"),
             "--tokenizer-from " + deepseek_v3_dir().string());
  const GgufFile g = export_and_read(tmp.file("m"), tmp.file("m.gguf"));
  EXPECT_EQ(str(g, "tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(str(g, "tokenizer.ggml.pre"), "deepseek-v3");
  const nlohmann::json tok =
      nlohmann::json::parse(std::ifstream(deepseek_v3_dir() / "tokenizer.json"));
  const GgufValue& tokens = g.kv.at("tokenizer.ggml.tokens");
  const GgufValue& types = g.kv.at("tokenizer.ggml.token_type");
  EXPECT_EQ(tokens.type, kArray);
  EXPECT_EQ(tokens.array_type, kString);
  EXPECT_EQ(types.array_type, 5u);  // int32
  ASSERT_EQ(tokens.strings.size(), 129280u);
  ASSERT_EQ(types.ints.size(), 129280u);
  std::set<int64_t> added;
  for (const auto& a : tok["added_tokens"]) {
    const size_t id = a["id"].get<size_t>();
    added.insert(id);
    EXPECT_EQ(tokens.strings[id], a["content"].get<std::string>());
    EXPECT_EQ(types.ints[id], 3) << a["content"];  // DeepSeek's added tokens are control tokens
  }
  size_t wrong = 0;  // the BPE vocabulary, by id; added tokens (BOS, EOS, pad) are control
  for (const auto& [text, id] : tok["model"]["vocab"].items())
    wrong += tokens.strings[id.get<size_t>()] != text ||
             (!added.count(id.get<int64_t>()) && types.ints[id.get<size_t>()] != 1);
  EXPECT_EQ(wrong, 0u);
  // Ids no text maps to are placeholders llama.cpp never produces.
  size_t unused = 0;
  for (size_t i = 0; i < 129280; ++i)
    if (!added.count(i) && i >= tok["model"]["vocab"].size()) {
      EXPECT_EQ(tokens.strings[i], "[PAD" + std::to_string(i) + "]");
      EXPECT_EQ(types.ints[i], 5);
      ++unused;
    }
  EXPECT_GT(unused, 0u);
  const GgufValue& merges = g.kv.at("tokenizer.ggml.merges");
  ASSERT_EQ(merges.strings.size(), tok["model"]["merges"].size());
  EXPECT_EQ(merges.strings.front(), tok["model"]["merges"][0].is_string()
                                        ? tok["model"]["merges"][0].get<std::string>()
                                        : tok["model"]["merges"][0][0].get<std::string>() + " " +
                                              tok["model"]["merges"][0][1].get<std::string>());
  EXPECT_EQ(u32(g, "tokenizer.ggml.bos_token_id"), 0u);  // <｜begin▁of▁sentence｜>
  EXPECT_EQ(u32(g, "tokenizer.ggml.eos_token_id"), 1u);  // <｜end▁of▁sentence｜>
  EXPECT_EQ(g.kv.at("tokenizer.ggml.add_bos_token").i, 1);
  EXPECT_NE(str(g, "tokenizer.chat_template").find("<｜Assistant｜>"), std::string::npos);
}

TEST(ExportGguf, ClearErrors) {
  TempDir tmp;
  make_model("glm_moe_dsa", "tiny", "bf16", tmp.file("glm"));
  auto r = run_handoff("export-gguf --model " + tmp.file("glm") + " --out " + tmp.file("g.gguf"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("glm_moe_dsa"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(tmp.file("g.gguf")));

  make_model("deepseek_v32", "tiny", "bf16", tmp.file("m"));
  r = run_handoff("export-gguf --model " + tmp.file("m") + " --out " + tmp.file("m.gguf") +
                  " --dtype f16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--dtype"), std::string::npos) << r.output;
  r = run_handoff("export-gguf --model " + tmp.file("m") + " --out " + tmp.file("no/such/m.gguf"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--out"), std::string::npos) << r.output;
  r = run_handoff("export-gguf --model " + tmp.file("missing") + " --out " + tmp.file("x.gguf"));
  EXPECT_EQ(r.exit_code, 2) << r.output;

  // A checkpoint with a tensor removed from it: refused before any file is written.
  fs::create_directories(tmp.file("cut"));
  fs::copy_file(tmp.file("m") + "/config.json", tmp.file("cut") + "/config.json");
  r = run_handoff("export-gguf --model " + tmp.file("cut") + " --out " + tmp.file("cut.gguf"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(fs::exists(tmp.file("cut.gguf")));
  EXPECT_FALSE(fs::exists(tmp.file("cut.gguf.partial")));

  // A tokenizer llama.cpp would pre-tokenize differently is refused by name.
  fs::create_directories(tmp.file("tk"));
  for (const auto& e : fs::directory_iterator(tmp.file("m")))
    fs::copy_file(e.path(), tmp.file("tk") / e.path().filename());
  std::ofstream(tmp.file("tk") + "/tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
            "pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": []})";
  r = run_handoff("export-gguf --model " + tmp.file("tk") + " --out " + tmp.file("tk.gguf"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pre_tokenizer"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace handoff::testing
