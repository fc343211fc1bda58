#include "handoff/text/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "handoff/error.h"

namespace handoff::text {
namespace {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) fail_input("cannot open {}", path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail_input("{}: invalid JSON: {}", path.string(), e.what());
  }
}

// tokenizer_config.json spells tokens either as strings or as {"content": ...} objects.
std::optional<std::string> config_token(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const auto& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return std::nullopt;
}

// How many input bytes the normalizer may turn into one byte; 0 when it may drop text.
size_t normalizer_shrink(const nlohmann::json& config) {
  if (config.is_null()) return 1;
  const std::string type = config.value("type", "");
  if (type == "Sequence") {
    size_t factor = 1;
    for (const auto& step : config.at("normalizers")) {
      const size_t f = normalizer_shrink(step);
      if (f == 0 || f > (size_t{1} << 20) / factor) return 0;
      factor *= f;
    }
    return factor;
  }
  if (type == "Replace") {
    const size_t from = config.at("pattern").value("String", std::string()).size();
    const size_t to = config.at("content").get<std::string>().size();
    if (to == 0) return 0;
    return std::max<size_t>(1, (from + to - 1) / to);
  }
  if (type == "Prepend" || type == "Lowercase") return 1;
  return 0;  // Strip and anything new: no bound
}

bool pre_tokenizer_drops_bytes(const nlohmann::json& config) {
  if (!config.is_object()) return false;
  if (config.value("behavior", "") == "Removed") return true;
  if (config.contains("pretokenizers"))
    for (const auto& step : config.at("pretokenizers"))
      if (pre_tokenizer_drops_bytes(step)) return true;
  return false;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  if (!std::filesystem::exists(dir / "tokenizer.json"))
    fail_input("{} has no tokenizer.json", model_dir);
  const auto tokenizer_json = read_json_file(dir / "tokenizer.json");
  nlohmann::json config;
  if (std::filesystem::exists(dir / "tokenizer_config.json"))
    config = read_json_file(dir / "tokenizer_config.json");
  return std::make_unique<Tokenizer>(tokenizer_json, config);
}

Tokenizer::Tokenizer(const nlohmann::json& tokenizer_json, const nlohmann::json& config) {
  try {
    normalizer_ = make_normalizer(tokenizer_json.value("normalizer", nlohmann::json()));
    pre_tokenizer_ = make_pre_tokenizer(tokenizer_json.value("pre_tokenizer", nlohmann::json()));
    model_ = std::make_unique<BpeModel>(tokenizer_json.at("model"));
    id_bytes_ = model_->id_bytes();
    id_known_.assign(id_bytes_.size(), false);
    for (size_t id = 0; id < id_bytes_.size(); ++id) id_known_[id] = !id_bytes_[id].empty();
    std::vector<AddedToken> added;
    for (const auto& t : tokenizer_json.value("added_tokens", nlohmann::json::array())) {
      AddedToken token;
      token.content = t.at("content").get<std::string>();
      token.id = t.at("id").get<int32_t>();
      token.special = t.value("special", false);
      token.lstrip = t.value("lstrip", false);
      token.rstrip = t.value("rstrip", false);
      if (token.id < 0) fail_input("added token '{}' has negative id", token.content);
      if (static_cast<size_t>(token.id) >= id_bytes_.size()) {
        id_bytes_.resize(token.id + 1);
        id_known_.resize(token.id + 1, false);
      }
      // An added token decodes to its literal content, even where the vocab also spells it.
      id_bytes_[token.id] = token.content;
      id_known_[token.id] = true;
      if (token.special) {
        if (id_special_.size() <= static_cast<size_t>(token.id)) id_special_.resize(token.id + 1);
        id_special_[token.id] = true;
      }
      added_ids_.emplace(token.content, token.id);
      added.push_back(std::move(token));
    }
    added_ = std::make_unique<AddedTokenMatcher>(std::move(added));
    size_t longest = 1;
    for (const std::string& bytes : id_bytes_) longest = std::max(longest, bytes.size());
    const size_t shrink = normalizer_shrink(tokenizer_json.value("normalizer", nlohmann::json()));
    const bool drops =
        pre_tokenizer_drops_bytes(tokenizer_json.value("pre_tokenizer", nlohmann::json()));
    // An added token with lstrip/rstrip swallows any run of spaces beside it.
    const bool strips = std::any_of(added_->tokens().begin(), added_->tokens().end(),
                                    [](const AddedToken& t) { return t.lstrip || t.rstrip; });
    max_bytes_per_token_ = drops || strips ? 0 : longest * shrink;
  } catch (const nlohmann::json::exception& e) {
    fail_input("tokenizer.json: {}", e.what());
  }
  if (const auto bos = config_token(config, "bos_token")) {
    bos_id_ = token_id(*bos);
    if (!bos_id_) fail_input("bos_token '{}' is not a token", *bos);
  }
  if (const auto eos = config_token(config, "eos_token")) {
    eos_id_ = token_id(*eos);
    if (!eos_id_) fail_input("eos_token '{}' is not a token", *eos);
  }
  if (config.is_object()) {
    add_bos_ = config.value("add_bos_token", false) && bos_id_.has_value();
    add_eos_ = config.value("add_eos_token", false) && eos_id_.has_value();
  }
}

std::optional<int32_t> Tokenizer::token_id(std::string_view content) const {
  if (const auto it = added_ids_.find(std::string(content)); it != added_ids_.end())
    return it->second;
  const int32_t id = model_->find(content);
  if (id >= 0) return id;
  return std::nullopt;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  if (add_special_tokens && add_bos_) ids.push_back(*bos_id_);
  for (const Segment& segment : added_->split(text)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    const std::string normalized = normalizer_(std::string(segment.text));
    if (normalized.empty()) continue;
    for (const auto& piece : pre_tokenizer_->split({normalized})) model_->encode(piece, ids);
  }
  if (add_special_tokens && add_eos_) ids.push_back(*eos_id_);
  return ids;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !id_known_[id])
    fail_input("token id {} is not in the vocabulary of {}", id, vocab_size());
  return id_bytes_[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

}  // namespace handoff::text
