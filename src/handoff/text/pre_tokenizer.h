#pragma once
// Pre-tokenizers from a tokenizer.json `pre_tokenizer` section: split text into the pieces that
// BPE sees separately. Pieces are raw byte strings; the byte-level alphabet is a vocab spelling
// detail handled by the BPE model.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace handoff::text {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits each piece of `pieces` further, in order.
  virtual std::vector<std::string> split(std::vector<std::string> pieces) const = 0;
};

// Builds the pre-tokenizer described by `config` (null means "the whole text is one piece").
// Supported: Sequence, Split (Regex or String pattern, all behaviors, invert), ByteLevel.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config);

}  // namespace handoff::text
