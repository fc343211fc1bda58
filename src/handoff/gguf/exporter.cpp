#include "handoff/gguf/exporter.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "handoff/error.h"
#include "handoff/gguf/file_writer.h"
#include "handoff/gguf/model_metadata.h"
#include "handoff/gguf/tensor_plan.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/checkpoint_layout.h"

namespace handoff::gguf {

namespace {

namespace fs = std::filesystem;
using tensor::DType;

// The main type for "auto": what the checkpoint's matrices are stored in, widened to f32 when
// bf16 cannot hold it exactly (f16), narrowed to bf16 for FP8 (dequantised values).
TensorType auto_type(const model::Checkpoint& ck, const model::ModelConfig& config) {
  for (const model::TensorSpec& s : model::checkpoint_tensors(config)) {
    if (s.kind != model::TensorKind::kMatrix) continue;
    const DType d = ck.stored_dtype(s.name);
    return d == DType::kF32 || d == DType::kF16 ? TensorType::kF32 : TensorType::kBF16;
  }
  return TensorType::kF32;
}

DType load_dtype(TensorType t) { return t == TensorType::kBF16 ? DType::kBF16 : DType::kF32; }

// Writes one planned tensor's bytes from the checkpoint.
void write_tensor(FileWriter& out, const model::Checkpoint& ck, const model::ModelConfig& c,
                  const PlannedTensor& t) {
  const DType dtype = load_dtype(t.info.type);
  const size_t es = tensor::dtype_size(dtype);
  switch (t.source) {
    case Source::kCopy:
    case Source::kStackExperts:
      for (const std::string& name : t.sources) {
        const tensor::Tensor w = ck.load(name, t.source_shape, dtype);
        out.append(w.raw(), w.nbytes());
      }
      return;
    case Source::kKeyB:
    case Source::kValueB: {
      // kv_b_proj rows per head: qk_nope rows (keys), then v_head_dim rows (values).
      const tensor::Tensor w = ck.load(t.sources[0], t.source_shape, dtype);
      const int64_t nope = c.qk_nope_head_dim, vd = c.v_head_dim, r = c.kv_lora_rank;
      const auto* base = static_cast<const char*>(w.raw());
      for (int64_t h = 0; h < c.num_attention_heads; ++h) {
        const char* head = base + static_cast<size_t>(h * (nope + vd) * r) * es;
        if (t.source == Source::kValueB) {
          out.append(head + static_cast<size_t>(nope * r) * es, static_cast<size_t>(vd * r) * es);
          continue;
        }
        // [nope, r] -> [r, nope]: llama.cpp multiplies q_nope by it to reach the latent space.
        std::vector<char> kt(static_cast<size_t>(nope * r) * es);
        for (int64_t i = 0; i < nope; ++i)
          for (int64_t j = 0; j < r; ++j)
            std::memcpy(&kt[static_cast<size_t>(j * nope + i) * es],
                        head + static_cast<size_t>(i * r + j) * es, es);
        out.append(kt.data(), kt.size());
      }
      return;
    }
  }
}

}  // namespace

ExportResult export_gguf(const ExportOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.dtype != "auto" && o.dtype != "f32" && o.dtype != "bf16")
    fail_input("--dtype: unsupported '{}' (expected auto, f32 or bf16)", o.dtype);
  const fs::path dir(o.model_dir);
  const fs::path out_dir = fs::absolute(o.out_path).parent_path();
  if (!fs::is_directory(out_dir))
    fail_input("--out {}: the folder {} does not exist", o.out_path, out_dir.string());
  const model::ModelConfig config = model::load_config((dir / "config.json").string());
  ExportResult r;
  r.architecture = gguf_architecture(config.family);
  const model::Checkpoint ck = model::Checkpoint::open(o.model_dir, config);
  const TensorType main_type = o.dtype == "f32"    ? TensorType::kF32
                               : o.dtype == "bf16" ? TensorType::kBF16
                                                   : auto_type(ck, config);
  r.dtype = main_type == TensorType::kF32 ? "f32" : "bf16";
  const std::vector<PlannedTensor> plan = plan_tensors(config, main_type);
  for (const PlannedTensor& t : plan)  // refuse a checkpoint missing a tensor before writing
    for (const std::string& s : t.sources)
      if (!ck.has(s)) fail_input("{}: checkpoint tensor '{}' is missing", o.model_dir, s);

  Metadata md;
  std::string name = fs::absolute(dir).lexically_normal().filename().string();
  if (name.empty()) name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  add_model_metadata(md, config, name,
                     main_type == TensorType::kF32 ? kFileTypeAllF32 : kFileTypeMostlyBF16);
  r.tokenizer = add_tokenizer_metadata(md, o.model_dir, config.vocab_size);

  std::vector<TensorInfo> infos;
  for (const PlannedTensor& t : plan) {
    infos.push_back(t.info);
    r.bytes += t.info.nbytes();
  }
  const std::string tmp = o.out_path + ".partial";
  try {
    FileWriter out(tmp, md, std::move(infos));
    for (const PlannedTensor& t : plan) {
      write_tensor(out, ck, config, t);
      ck.release_pages();  // keep the resident set to one tensor's pages, not the checkpoint's
    }
    out.close();
    fs::rename(tmp, o.out_path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  r.tensors = plan.size();
  r.metadata_keys = md.count();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace handoff::gguf
