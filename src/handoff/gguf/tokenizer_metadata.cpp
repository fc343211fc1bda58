#include "handoff/gguf/tokenizer_metadata.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "handoff/error.h"

namespace handoff::gguf {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input("cannot read {}", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail_input("{}: not valid JSON: {}", path.string(), e.what());
  }
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input("cannot read {}", path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The regexes of DeepSeek-V3's pre-tokenizer (digits in runs of up to three, CJK runs, then
// words / punctuation / whitespace), byte-level after them: what llama.cpp calls "deepseek-v3".
// llama.cpp names a pre-tokenizer rather than reading its regexes, so an exported tokenizer must
// be one it knows; this is the one the DeepSeek families ship.
const char* const kDeepseekV3Splits[] = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

bool is_deepseek_v3_pre(const json& pre) {
  if (!pre.is_object() || pre.value("type", "") != "Sequence") return false;
  const json& steps = pre.value("pretokenizers", json::array());
  if (!steps.is_array() || steps.size() != std::size(kDeepseekV3Splits) + 1) return false;
  for (size_t i = 0; i < std::size(kDeepseekV3Splits); ++i) {
    const json& s = steps[i];
    if (s.value("type", "") != "Split" || s.value("behavior", "") != "Isolated") return false;
    const json pattern = s.value("pattern", json::object());
    if (pattern.value("Regex", "") != kDeepseekV3Splits[i]) return false;
  }
  return steps.back().value("type", "") == "ByteLevel";
}

// A token that is special by its look although not marked so (llama.cpp's converter rule for
// DeepSeek's "<｜...｜>" and "<|...|>" tokens).
bool looks_special(const std::string& t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || wrapped("<|", "|>") || wrapped("<\xef\xbd\x9c", "\xef\xbd\x9c>");
}

// A special token entry of tokenizer_config.json: a string or an AddedToken object.
std::optional<std::string> special_content(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

TokenizerSummary add_tokenizer_metadata(Metadata& md, const std::string& model_dir,
                                        int64_t vocab_size) {
  const fs::path dir(model_dir);
  const fs::path tok_path = dir / "tokenizer.json";
  TokenizerSummary summary;
  if (!fs::exists(tok_path)) {
    md.add_string("tokenizer.ggml.model", "none");
    summary.model = "none";
    return summary;
  }
  const std::string where = tok_path.string();
  const json tok = read_json(tok_path);
  const json model = tok.value("model", json::object());
  if (model.value("type", "") != "BPE")
    fail_input("{}: model.type '{}' is not BPE (only byte-level BPE tokenizers are exported)",
               where, model.value("type", ""));
  if (!is_deepseek_v3_pre(tok.value("pre_tokenizer", json())))
    fail_input(
        "{}: pre_tokenizer is not DeepSeek-V3's; llama.cpp selects pre-tokenizers by name "
        "and export-gguf knows only 'deepseek-v3' (remove tokenizer.json to export with "
        "tokenizer 'none')",
        where);
  if (!model.contains("vocab") || !model["vocab"].is_object())
    fail_input("{}: model.vocab is missing", where);

  std::vector<std::string> tokens(static_cast<size_t>(vocab_size));
  std::vector<int32_t> types(static_cast<size_t>(vocab_size),
                             static_cast<int32_t>(TokenType::kUnused));
  std::vector<bool> seen(static_cast<size_t>(vocab_size), false);
  auto place = [&](int64_t id, const std::string& text, TokenType type) {
    if (id < 0 || id >= vocab_size)
      fail_input("{}: token '{}' has id {}, outside the model's vocab_size {}", where, text, id,
                 vocab_size);
    tokens[id] = text;
    types[id] = static_cast<int32_t>(type);
    seen[id] = true;
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) fail_input("{}: model.vocab['{}'] is not an integer", where, text);
    place(id.get<int64_t>(), text, TokenType::kNormal);
  }
  std::map<std::string, int64_t> added_ids;
  for (const json& a : tok.value("added_tokens", json::array())) {
    if (!a.contains("id") || !a.contains("content"))
      fail_input("{}: an added_tokens entry lacks id or content", where);
    std::string text = a["content"].get<std::string>();
    const int64_t id = a["id"].get<int64_t>();
    added_ids[text] = id;
    if (a.value("special", false) || looks_special(text)) {
      place(id, text, TokenType::kControl);
    } else {
      // llama.cpp expects user-defined tokens pre-normalised: U+2581 stands for a space.
      for (size_t p; (p = text.find("\xe2\x96\x81")) != std::string::npos;) text.replace(p, 3, " ");
      place(id, text, TokenType::kUserDefined);
    }
  }
  for (int64_t i = 0; i < vocab_size; ++i)
    if (!seen[i]) tokens[i] = "[PAD" + std::to_string(i) + "]";  // an id no text maps to

  std::vector<std::string> merges;
  for (const json& m : model.value("merges", json::array())) {
    if (m.is_string()) {
      merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      // The pair form: a space inside a part is byte-level encoded (U+0120) so that the
      // joined "a b" string splits back unambiguously.
      auto enc = [](std::string s) {
        for (size_t p; (p = s.find(' ')) != std::string::npos;) s.replace(p, 1, "\xc4\xa0");
        return s;
      };
      merges.push_back(enc(m[0].get<std::string>()) + " " + enc(m[1].get<std::string>()));
    } else {
      fail_input("{}: model.merges holds an entry that is neither \"a b\" nor [a, b]", where);
    }
  }

  md.add_string("tokenizer.ggml.model", "gpt2");
  md.add_string("tokenizer.ggml.pre", "deepseek-v3");
  md.add_string_array("tokenizer.ggml.tokens", tokens);
  md.add_i32_array("tokenizer.ggml.token_type", types);
  md.add_string_array("tokenizer.ggml.merges", merges);
  summary = {"gpt2", "deepseek-v3", tokens.size(), merges.size()};

  const fs::path config_path = dir / "tokenizer_config.json";
  const json config = fs::exists(config_path) ? read_json(config_path) : json::object();
  const json model_config =
      fs::exists(dir / "config.json") ? read_json(dir / "config.json") : json::object();
  // Special ids by content (tokenizer_config.json), else config.json's numeric ids.
  auto special_id = [&](const char* key, const char* config_key) -> std::optional<int64_t> {
    if (auto content = special_content(config, key)) {
      const auto it = added_ids.find(*content);
      if (it != added_ids.end()) return it->second;
      if (model["vocab"].contains(*content)) return model["vocab"][*content].get<int64_t>();
      fail_input("{}: {} '{}' is not a token of {}", config_path.string(), key, *content, where);
    }
    if (model_config.contains(config_key) && model_config[config_key].is_number_integer())
      return model_config[config_key].get<int64_t>();
    return std::nullopt;
  };
  auto put_id = [&](const char* gguf_key, std::optional<int64_t> id) {
    if (!id) return;
    if (*id < 0 || *id >= vocab_size)
      fail_input("{}: special token id {} is outside vocab_size {}", where, *id, vocab_size);
    md.add_u32(gguf_key, static_cast<uint32_t>(*id));
  };
  put_id("tokenizer.ggml.bos_token_id", special_id("bos_token", "bos_token_id"));
  put_id("tokenizer.ggml.eos_token_id", special_id("eos_token", "eos_token_id"));
  put_id("tokenizer.ggml.unknown_token_id", special_id("unk_token", "unk_token_id"));
  put_id("tokenizer.ggml.padding_token_id", special_id("pad_token", "pad_token_id"));
  if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean())
    md.add_bool("tokenizer.ggml.add_bos_token", config["add_bos_token"].get<bool>());
  if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean())
    md.add_bool("tokenizer.ggml.add_eos_token", config["add_eos_token"].get<bool>());
  // chat_template.jinja wins over tokenizer_config.json's template, as when Handoff loads.
  if (fs::exists(dir / "chat_template.jinja"))
    md.add_string("tokenizer.chat_template", read_text(dir / "chat_template.jinja"));
  else if (config.contains("chat_template") && config["chat_template"].is_string())
    md.add_string("tokenizer.chat_template", config["chat_template"].get<std::string>());
  return summary;
}

}  // namespace handoff::gguf
