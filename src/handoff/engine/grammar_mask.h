#pragma once
// Constrained decoding of forced tool calls: which tokens may come next so that the output stays
// a prefix of a text of the request's ToolCallGrammar, and can still be completed within the
// tokens left. Each token's bytes are tried on a copy of the grammar state; tokens are grouped
// by first byte so that a byte the state refuses skips its whole group at once.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "handoff/text/tokenizer.h"
#include "handoff/text/tool_call_grammar.h"

namespace handoff::engine {

// Every id's bytes, grouped by first byte; built once per tokenizer.
class TokenTable {
 public:
  // `tokenizer` must outlive the table.
  explicit TokenTable(const text::Tokenizer& tokenizer);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  std::string_view bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  // An added token (special or not): the tokenizer's markers.
  bool added(int32_t id) const { return added_[static_cast<size_t>(id)] != 0; }
  // Plain string text: whole UTF-8 characters, none of '"', '\\', '<' or a control character
  // (what leaves a ToolCallGrammarState in_plain_text() unchanged).
  bool plain(int32_t id) const { return plain_[static_cast<size_t>(id)] != 0; }
  // The ids whose bytes begin with `first` (ids without bytes are in no group).
  const int32_t* group_begin(uint8_t first) const { return ids_.data() + start_[first]; }
  const int32_t* group_end(uint8_t first) const { return ids_.data() + start_[first + 1u]; }

 private:
  std::vector<std::string_view> bytes_;
  std::vector<uint8_t> added_;
  std::vector<uint8_t> plain_;
  std::vector<int32_t> ids_;
  std::array<uint32_t, 257> start_{};
};

// Sets allowed[id] (sized to the table's vocabulary) to 1 for each token that keeps `state`
// within the grammar and leaves a completion cost (ToolCallGrammarState::completion_cost) of at
// most `budget - 1` (`budget`: the tokens left, this one included), 0 for the others. Added
// tokens (markers) are allowed only where they spell the format's literal text, never inside
// arguments. Returns how many are allowed. A budget of 0 or less puts no length bound.
int64_t allowed_tokens(const TokenTable& table, const text::ToolCallGrammarState& state,
                       int64_t budget, std::vector<uint8_t>& allowed);

}  // namespace handoff::engine
