#pragma once
// A HuggingFace fast tokenizer (byte-level BPE) loaded from a model folder's tokenizer.json and
// tokenizer_config.json. Text is bytes: encode takes any byte string and decode returns exactly
// the bytes that were encoded, so decode(encode(s)) == s even for invalid UTF-8.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "handoff/text/added_tokens.h"
#include "handoff/text/bpe.h"
#include "handoff/text/normalizer.h"
#include "handoff/text/pre_tokenizer.h"

namespace handoff::text {

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json (bos/eos tokens,
  // add_bos_token / add_eos_token). Throws InputError for missing or unsupported files.
  static std::unique_ptr<Tokenizer> load(const std::string& model_dir);
  // Same, from already parsed JSON (`config` may be null).
  Tokenizer(const nlohmann::json& tokenizer_json, const nlohmann::json& config);

  // Ids of `text`; with add_special_tokens the configured BOS (and EOS) are added.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The bytes of `ids`; throws InputError for an id outside the vocabulary.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes of one id; throws InputError when it is unknown.
  const std::string& token_bytes(int32_t id) const;

  // Whether `id` is an added token marked "special" (BOS, EOS, padding, placeholders): the ones
  // skip_special_tokens drops from output text. Ids outside the vocabulary are not special.
  bool is_special(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < id_special_.size() && id_special_[id];
  }

  // The added tokens (special or not: BOS, EOS, chat and tool-call markers).
  const std::vector<AddedToken>& added_tokens() const { return added_->tokens(); }

  int32_t vocab_size() const { return static_cast<int32_t>(id_bytes_.size()); }
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  // Id of an added or vocab token spelled exactly `content` (raw bytes), if any.
  std::optional<int32_t> token_id(std::string_view content) const;
  // The most input bytes one token can stand for: the longest token's bytes, times what the
  // normalizer may shrink text by. A text of B bytes has at least ceil(B / this) tokens, which
  // lets a server refuse an oversized prompt without tokenising it. 0 when the normalizer or
  // pre-tokenizer can drop bytes (Strip, Replace with "", Split "Removed") or an added token
  // strips the spaces beside it: then no bound holds.
  size_t max_bytes_per_token() const { return max_bytes_per_token_; }

 private:
  Normalizer normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<AddedTokenMatcher> added_;
  std::unordered_map<std::string, int32_t> added_ids_;  // content -> id (the first listed)
  std::vector<std::string> id_bytes_;
  std::vector<bool> id_known_;
  std::vector<bool> id_special_;
  std::optional<int32_t> bos_id_, eos_id_;
  bool add_bos_ = false, add_eos_ = false;
  size_t max_bytes_per_token_ = 0;
};

}  // namespace handoff::text
