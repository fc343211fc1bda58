#include "golden_support.h"

#include <cmath>
#include <fstream>
#include <map>
#include <mutex>

#include "handoff/model/safetensors.h"

namespace handoff::testing {

std::string golden_dir(const std::string& name) {
  return std::string(HANDOFF_TEST_DATA) + "/golden/" + name;
}

namespace {

const nlohmann::json& golden_file(const std::string& name, const std::string& file) {
  static std::mutex mutex;
  static std::map<std::string, nlohmann::json> cache;
  std::lock_guard lock(mutex);
  const std::string path = golden_dir(name) + "/" + file;
  auto it = cache.find(path);
  if (it == cache.end()) {
    std::ifstream in(path);
    it = cache.emplace(path, nlohmann::json::parse(in)).first;
  }
  return it->second;
}

}  // namespace

const nlohmann::json& golden(const std::string& name) { return golden_file(name, "golden.json"); }

const nlohmann::json& golden_fp8sim(const std::string& name) {
  return golden_file(name, "golden_fp8sim.json");
}

engine::GenerationResult run_teacher_forced(model::Model& model, const nlohmann::json& prompt,
                                            int64_t prefill_chunk) {
  const auto tokens = prompt["tokens"].get<std::vector<int32_t>>();
  const auto forced = prompt["greedy_tokens"].get<std::vector<int32_t>>();
  engine::GenerationOptions options;
  options.max_new_tokens = static_cast<int64_t>(forced.size());
  options.prefill_chunk = prefill_chunk;
  options.record = true;
  engine::Generator generator(model, static_cast<int64_t>(tokens.size() + forced.size()), 4);
  engine::Sampler sampler(0);
  return generator.run(tokens, options, sampler, forced);
}

std::filesystem::path write_golden_variant(
    const std::string& name, const std::string& tag,
    const std::function<void(nlohmann::json&)>& edit_config,
    const std::function<std::optional<tensor::Tensor>(const std::string&, const tensor::Tensor&)>&
        edit_tensor) {
  const auto dir = std::filesystem::temp_directory_path() / ("handoff_" + tag + "_" + name);
  std::filesystem::create_directories(dir);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(golden_dir(name) + "/config.json"));
  edit_config(config);
  std::ofstream(dir / "config.json") << config.dump(2);
  const auto file = model::SafetensorsFile::open(golden_dir(name) + "/model.safetensors");
  std::vector<std::pair<std::string, tensor::Tensor>> tensors;
  for (const auto& [tensor_name, entry] : file->entries())
    if (auto t = edit_tensor(tensor_name, file->get(tensor_name)))
      tensors.emplace_back(tensor_name, *t);
  model::write_safetensors((dir / "model.safetensors").string(), tensors);
  return dir;
}

double max_abs_diff(const std::vector<std::vector<float>>& ours, const nlohmann::json& golden) {
  double worst = 0.0;
  if (ours.size() != golden.size()) return INFINITY;
  for (size_t r = 0; r < ours.size(); ++r) {
    if (ours[r].size() != golden[r].size()) return INFINITY;
    for (size_t i = 0; i < ours[r].size(); ++i)
      worst =
          std::max(worst, std::fabs(static_cast<double>(ours[r][i]) - golden[r][i].get<double>()));
  }
  return worst;
}

double max_abs_diff(const std::vector<std::vector<float>>& a,
                    const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r].size() != b[r].size()) return INFINITY;
    for (size_t i = 0; i < a[r].size(); ++i)
      worst = std::max<double>(worst, std::fabs(a[r][i] - b[r][i]));
  }
  return worst;
}

}  // namespace handoff::testing
