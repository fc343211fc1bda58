#pragma once
// Added tokens (special or not) are cut out of the text before pre-tokenization, longest match
// first at each position, scanning left to right.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace handoff::text {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;  // swallow whitespace on the left
  bool rstrip = false;  // swallow whitespace on the right
};

// A piece of input: either plain text (`id` < 0) or one added token.
struct Segment {
  std::string_view text;
  int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  std::vector<Segment> split(std::string_view text) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  // First byte -> token indices, longest content first.
  std::unordered_map<unsigned char, std::vector<size_t>> by_first_byte_;
};

}  // namespace handoff::text
