#include "handoff/text/added_tokens.h"

#include <algorithm>

namespace handoff::text {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (!tokens_[i].content.empty())
      by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  for (auto& [byte, indices] : by_first_byte_)
    std::stable_sort(indices.begin(), indices.end(), [&](size_t a, size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
}

std::vector<Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t plain_start = 0, pos = 0;
  while (pos < text.size()) {
    const auto it = by_first_byte_.find(static_cast<unsigned char>(text[pos]));
    const AddedToken* match = nullptr;
    if (it != by_first_byte_.end())
      for (size_t index : it->second)
        if (text.substr(pos).starts_with(tokens_[index].content)) {
          match = &tokens_[index];
          break;
        }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    size_t plain_end = pos;
    if (match->lstrip)
      while (plain_end > plain_start && is_space(text[plain_end - 1])) --plain_end;
    if (plain_end > plain_start)
      segments.push_back({text.substr(plain_start, plain_end - plain_start), -1});
    segments.push_back({text.substr(pos, match->content.size()), match->id});
    pos += match->content.size();
    if (match->rstrip)
      while (pos < text.size() && is_space(text[pos])) ++pos;
    plain_start = pos;
  }
  if (plain_start < text.size()) segments.push_back({text.substr(plain_start), -1});
  return segments;
}

}  // namespace handoff::text
