#include "handoff/engine/grammar_mask.h"

#include <algorithm>

namespace handoff::engine {

TokenTable::TokenTable(const text::Tokenizer& tokenizer) {
  const int32_t n = tokenizer.vocab_size();
  bytes_.resize(static_cast<size_t>(n));
  added_.assign(static_cast<size_t>(n), 0);
  for (const auto& t : tokenizer.added_tokens())
    if (t.id >= 0 && t.id < n) added_[static_cast<size_t>(t.id)] = 1;
  std::array<uint32_t, 256> count{};
  for (int32_t id = 0; id < n; ++id) {
    try {
      bytes_[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
    } catch (const std::exception&) {
      continue;  // a gap in the ids: no bytes, never allowed
    }
    if (!bytes_[static_cast<size_t>(id)].empty())
      ++count[static_cast<uint8_t>(bytes_[static_cast<size_t>(id)][0])];
  }
  plain_.assign(static_cast<size_t>(n), 0);
  for (int32_t id = 0; id < n; ++id) {
    const std::string_view s = bytes_[static_cast<size_t>(id)];
    if (s.empty() || added_[static_cast<size_t>(id)] != 0 || s.find('<') != std::string_view::npos)
      continue;
    text::JsonPrefix in_string;
    bool ok = in_string.feed('"');
    for (size_t i = 0; i < s.size() && ok; ++i)
      ok = s[i] != '"' && s[i] != '\\' && in_string.feed(static_cast<uint8_t>(s[i]));
    plain_[static_cast<size_t>(id)] = ok && in_string.in_plain_string() ? 1 : 0;
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
  // What ending the call may cost after this token: the tokens left after it.
  const size_t room = budget > 0 ? static_cast<size_t>(budget - 1) : SIZE_MAX;
  const bool literal_now = state.in_literal();
  if (state.in_plain_text()) {
    // Inside string text (most of a call's steps): plain tokens leave the state, and so the
    // cost of ending, as they are; only the others need their bytes tried.
    const uint8_t plain_ok = state.completion_cost() <= room ? 1 : 0;
    for (int32_t id = 0; id < table.vocab_size(); ++id) {
      if (table.plain(id)) {
        allowed[static_cast<size_t>(id)] = plain_ok;
        count += plain_ok;
        continue;
      }
      const std::string_view s = table.bytes(id);
      if (s.empty() || table.added(id)) continue;
      text::ToolCallGrammarState st = state;
      bool ok = true;
      for (size_t i = 0; i < s.size() && ok; ++i) ok = st.feed(static_cast<uint8_t>(s[i]));
      if (!ok || st.completion_cost() > room) continue;
      allowed[static_cast<size_t>(id)] = 1;
      ++count;
    }
    return count;
  }
  for (int first = 0; first < 256; ++first) {
    const int32_t* begin = table.group_begin(static_cast<uint8_t>(first));
    const int32_t* end = table.group_end(static_cast<uint8_t>(first));
    if (begin == end) continue;
    text::ToolCallGrammarState after_first = state;
    if (!after_first.feed(static_cast<uint8_t>(first))) continue;
    for (const int32_t* it = begin; it != end; ++it) {
      const int32_t id = *it;
      const std::string_view s = table.bytes(id);
      const bool marker = table.added(id);
      if (marker && !literal_now) continue;
      text::ToolCallGrammarState st = after_first;
      bool ok = true;
      for (size_t i = 1; i < s.size() && ok; ++i) {
        if (marker && !st.in_literal())
          ok = false;
        else
          ok = st.feed(static_cast<uint8_t>(s[i]));
      }
      if (!ok || st.completion_cost() > room) continue;
      allowed[static_cast<size_t>(id)] = 1;
      ++count;
    }
  }
  return count;
}

}  // namespace handoff::engine
