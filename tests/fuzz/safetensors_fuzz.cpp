// Fuzzes the model loader: the input is config.json text, a NUL, then a model.safetensors file.
// Both are written into a model folder and loaded the way `handoff` does: the config is parsed
// and validated, the checkpoint opened (every header checked), and every tensor read and
// converted (BF16/F16 to F32, FP8 dequantised through its block scales). Each step must end in
// a value or an InputError; an unreadable config still lets the checkpoint be fuzzed.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fuzz_support.h"
#include "handoff/error.h"
#include "handoff/log.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/config.h"
#include "handoff/model/safetensors.h"

namespace {

namespace fs = std::filesystem;

// One model folder per fuzzing process, removed at exit.
class ModelDir {
 public:
  ModelDir() {
    std::string pattern = (fs::temp_directory_path() / "handoff-fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~ModelDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  void write(const char* name, std::string_view bytes) const {
    std::ofstream out(path_ / name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  fs::path path_;
};

const ModelDir& model_dir() {
  static const ModelDir dir;
  return dir;
}

// Reads every byte of a tensor, so ASan sees any read past the mapping.
float touch(const handoff::tensor::Tensor& t) {
  const auto* bytes = t.data<unsigned char>();
  float sum = 0;
  for (size_t i = 0; i < t.nbytes(); ++i) sum += bytes[i];
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  handoff::log::set_level(handoff::log::Level::kError);
  model_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace handoff;
  const auto [config_text, weights] = fuzz::split_at_nul(data, size);
  const ModelDir& dir = model_dir();
  dir.write("config.json", config_text);
  dir.write("model.safetensors", weights);

  model::ModelConfig config;
  try {
    config = model::load_config((dir.path() / "config.json").string());
  } catch (const InputError&) {
  }
  volatile float sink = 0;
  std::shared_ptr<model::SafetensorsFile> file;
  try {
    file = model::SafetensorsFile::open((dir.path() / "model.safetensors").string());
    for (const auto& [name, entry] : file->entries()) sink = sink + touch(file->get(name));
  } catch (const InputError&) {
  }
  try {
    const auto checkpoint = model::Checkpoint::open(dir.path().string(), config);
    (void)checkpoint.total_bytes();
    for (const std::string& name : checkpoint.names()) {
      (void)checkpoint.stored_bytes(name);
      const auto dtype = checkpoint.stored_dtype(name);
      (void)dtype;
      try {
        // Its own shape, so the load gets past the shape check into the conversion.
        const auto& shape = file->entries().at(name).shape;
        sink = sink + touch(checkpoint.load(name, shape, tensor::DType::kF32));
        sink = sink + touch(checkpoint.load(name, shape, tensor::DType::kBF16));
      } catch (const InputError&) {
      }
    }
  } catch (const InputError&) {
  }
  return 0;
}
