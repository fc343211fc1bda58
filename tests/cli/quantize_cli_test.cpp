// `handoff quantize` and `--quantize fp8` end to end: the written checkpoint has the published
// FP8 layout (names, dtypes, scale grids, quantization_config), loads back to bit-identical
// logits as quantising at load, and misuse is a clear usage error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_support.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/config.h"
#include "handoff/model/safetensors.h"

namespace handoff::testing {
namespace {

namespace fs = std::filesystem;
const std::string kBf16 = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_small_bf16";
const std::string kFp8 = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_fp8_blocks";

struct Tmp {
  fs::path dir = fs::temp_directory_path() / ("handoff_quantize_cli_" + std::to_string(getpid()));
  Tmp() { fs::create_directories(dir); }
  ~Tmp() { fs::remove_all(dir); }
};

TEST(QuantizeCli, WritesThePublishedLayoutAndLoadsToTheSameLogits) {
  Tmp tmp;
  const std::string out = (tmp.dir / "q").string();
  const auto q = run_handoff("quantize --in " + kBf16 + " --out " + out);
  ASSERT_EQ(q.exit_code, 0) << q.output;

  // Layout: what the published FP8 checkpoints (and dsv32_fp8_blocks) quantise, and nothing else.
  const model::ModelConfig config = model::load_config(out + "/config.json");
  EXPECT_EQ(config.weight_block_rows, 128);
  EXPECT_EQ(config.weight_block_cols, 128);
  const auto cfg = nlohmann::json::parse(std::ifstream(out + "/config.json"));
  EXPECT_EQ(cfg["quantization_config"]["quant_method"], "fp8");
  EXPECT_EQ(cfg["quantization_config"]["fmt"], "e4m3");
  const auto in = model::SafetensorsFile::open(kBf16 + "/model.safetensors");
  const auto st = model::SafetensorsFile::open(out + "/model.safetensors");
  const std::set<std::string> matrices = model::Checkpoint::fp8_quantisable(config);
  int64_t fp8 = 0;
  for (const auto& [name, e] : in->entries()) {
    ASSERT_TRUE(st->has(name)) << name;
    const model::TensorEntry& o = st->entries().at(name);
    EXPECT_EQ(o.shape, e.shape) << name;
    if (matrices.count(name) != 0) {
      ++fp8;
      EXPECT_EQ(o.dtype, tensor::DType::kF8E4M3) << name;
      const model::TensorEntry& s = st->entries().at(name + "_scale_inv");
      EXPECT_EQ(s.dtype, tensor::DType::kF32);
      EXPECT_EQ(s.shape, (tensor::Shape{(e.shape[0] + 127) / 128, (e.shape[1] + 127) / 128}));
    } else {
      EXPECT_EQ(o.dtype, e.dtype) << name;
      EXPECT_FALSE(st->has(name + "_scale_inv")) << name;
    }
  }
  EXPECT_EQ(st->entries().size(), in->entries().size() + static_cast<size_t>(fp8));
  // The same names are FP8 in the published-format golden.
  const auto ref = model::SafetensorsFile::open(kFp8 + "/model.safetensors");
  for (const auto& [name, e] : ref->entries()) {
    if (name.find("layers.1.") == std::string::npos) continue;
    EXPECT_EQ(e.dtype == tensor::DType::kF8E4M3, matrices.count(name) != 0) << name;
  }
  EXPECT_FALSE(matrices.count("lm_head.weight") || matrices.count("model.embed_tokens.weight"));

  // Loading the written checkpoint = quantising the original at load, bit for bit, at both
  // dtypes.
  for (const std::string dtype : {"bf16", "f32"}) {
    const std::string a = (tmp.dir / ("a_" + dtype + ".json")).string();
    const std::string b = (tmp.dir / ("b_" + dtype + ".json")).string();
    const std::string common =
        " --prompts-json " + kBf16 + "/prompts.json --max-new-tokens 4 --dtype " + dtype;
    const auto ra =
        run_handoff("generate --model " + kBf16 + " --quantize fp8 --dump " + a + common);
    ASSERT_EQ(ra.exit_code, 0) << ra.output;
    EXPECT_NE(ra.output.find("quantised to fp8"), std::string::npos) << ra.output;
    const auto rb = run_handoff("generate --model " + out + " --dump " + b + common);
    ASSERT_EQ(rb.exit_code, 0) << rb.output;
    const auto ja = nlohmann::json::parse(std::ifstream(a));
    const auto jb = nlohmann::json::parse(std::ifstream(b));
    ASSERT_FALSE(ja["prompts"].empty());
    EXPECT_EQ(ja["prompts"], jb["prompts"]) << dtype;
    // And it is not the unquantised model's output.
    const std::string c = (tmp.dir / ("c_" + dtype + ".json")).string();
    ASSERT_EQ(run_handoff("generate --model " + kBf16 + " --dump " + c + common).exit_code, 0);
    const auto jc = nlohmann::json::parse(std::ifstream(c));
    EXPECT_NE(ja["prompts"][0]["prefill_logits"], jc["prompts"][0]["prefill_logits"]);
  }
}

TEST(QuantizeCli, MisuseIsAUsageError) {
  Tmp tmp;
  const std::string out = (tmp.dir / "x").string();
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"generate --model " + kFp8 + " --prompt-ids 1 --quantize fp8", "already quantised"},
      {"generate --model " + kBf16 + " --prompt-ids 1 --quantize int4", "--quantize"},
      {"bench offline --model " + kFp8 + " --quantize fp8", "already quantised"},
      {"quantize --in " + kFp8 + " --out " + out, "already quantised"},
      {"quantize --in " + kBf16 + " --out " + kBf16, "input folder"},
      {"quantize --in " + kBf16 + " --out " + (tmp.dir).string() + "/..", "not an empty folder"},
      {"quantize --in /nonexistent --out " + out, "/nonexistent"},
      {"quantize --out " + out, "--in"},
  };
  for (const auto& c : cases) {
    const auto r = run_handoff(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(out)) << "quantize wrote before failing";
}

}  // namespace
}  // namespace handoff::testing
