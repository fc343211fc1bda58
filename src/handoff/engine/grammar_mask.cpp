#include "handoff/engine/grammar_mask.h"

#include <algorithm>

namespace handoff::engine {

TokenTable::TokenTable(const text::Tokenizer& tokenizer) {
  const int32_t n = tokenizer.vocab_size();
  bytes_.resize(static_cast<size_t>(n));
  special_.assign(static_cast<size_t>(n), 0);
  std::array<uint32_t, 256> count{};
  for (int32_t id = 0; id < n; ++id) {
    try {
      bytes_[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
    } catch (const std::exception&) {
      continue;  // a gap in the ids: no bytes, never allowed
    }
    special_[static_cast<size_t>(id)] = tokenizer.is_special(id) ? 1 : 0;
    if (!bytes_[static_cast<size_t>(id)].empty())
      ++count[static_cast<uint8_t>(bytes_[static_cast<size_t>(id)][0])];
  }
  for (size_t b = 0; b < 256; ++b) start_[b + 1] = start_[b] + count[b];
  ids_.resize(start_[256]);
  std::array<uint32_t, 256> fill{};
  for (int32_t id = 0; id < n; ++id) {
    const std::string_view s = bytes_[static_cast<size_t>(id)];
    if (s.empty()) continue;
    const auto b = static_cast<uint8_t>(s[0]);
    ids_[start_[b] + fill[b]++] = id;
  }
}

int64_t allowed_tokens(const TokenTable& table, const text::ToolCallGrammarState& state,
                       int64_t budget, std::vector<uint8_t>& allowed) {
  std::fill(allowed.begin(), allowed.end(), uint8_t{0});
  int64_t count = 0;
  // Bytes a token may still need to end the call after it: the tokens left after it, one byte
  // each at worst.
  const size_t room = budget > 0 ? static_cast<size_t>(budget - 1) : SIZE_MAX;
  const bool literal_now = state.in_literal();
  for (int first = 0; first < 256; ++first) {
    const int32_t* begin = table.group_begin(static_cast<uint8_t>(first));
    const int32_t* end = table.group_end(static_cast<uint8_t>(first));
    if (begin == end) continue;
    text::ToolCallGrammarState after_first = state;
    if (!after_first.feed(static_cast<uint8_t>(first))) continue;
    for (const int32_t* it = begin; it != end; ++it) {
      const int32_t id = *it;
      const std::string_view s = table.bytes(id);
      const bool special = table.special(id);
      if (special && !literal_now) continue;
      text::ToolCallGrammarState st = after_first;
      bool ok = true;
      for (size_t i = 1; i < s.size() && ok; ++i) {
        if (special && !st.in_literal()) ok = false;
        else ok = st.feed(static_cast<uint8_t>(s[i]));
      }
      if (!ok || st.completion_length() > room) continue;
      allowed[static_cast<size_t>(id)] = 1;
      ++count;
    }
  }
  return count;
}

}  // namespace handoff::engine
