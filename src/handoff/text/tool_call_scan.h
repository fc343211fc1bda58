#pragma once
// Internal to the tool-call parsers: matching markers against text that may still be growing,
// and the shared streaming machinery (content until a call block starts, then calls).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "handoff/text/tool_call_parser.h"

namespace handoff::text::tool_scan {

// kPartial: the text ends before the answer is known (it is a proper prefix of the marker).
enum class Match { kYes, kNo, kPartial };

Match match_at(std::string_view s, std::string_view marker);
// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view s, std::string_view marker);
bool is_space(char c);
std::string_view trim(std::string_view s);

// A read position over the growing text of a call block.
struct Cursor {
  std::string_view s;
  size_t pos = 0;
  void skip_space() {
    while (pos < s.size() && is_space(s[pos])) ++pos;
  }
  bool at_end() const { return pos >= s.size(); }
  // Moves past `marker` when the text continues with it.
  Match literal(std::string_view marker);
  // The text up to `delimiter`, moving past it; kPartial while the delimiter has not come yet.
  Match until(std::string_view delimiter, std::string& out);
};

// What the front of a call block holds.
struct Step {
  enum Kind { kNeedMore, kCall, kEnd, kInvalid } kind = kNeedMore;
  size_t consumed = 0;  // kCall, kEnd: bytes of the block text used
  std::string name;     // kCall; kNeedMore once the name is complete
  // kCall: JSON object text. kNeedMore: a prefix of what it will be (the part that is certain).
  std::string arguments;
};

// The arguments object's text so far, a prefix of its final dump (`done`, compact, as dump_object
// writes it): the complete parameters, then, when `key` is given and new, the string value being
// written. Of `value` the end that could begin `value_end` and an unfinished UTF-8 character are
// held back. Empty while there is nothing but the opening brace.
std::string partial_object(const nlohmann::ordered_json& done, const std::string* key,
                           std::string_view value, std::string_view value_end);
// The final arguments text of a parameter-list format (DSML, GLM).
std::string dump_object(const nlohmann::ordered_json& object);

// At the front of a call block: its end (a kEnd step), or the opening of its next call (nullopt:
// the caller parses the call after it); a partial marker needs more text, anything else is
// invalid.
std::optional<Step> block_end_or_call(Cursor& c, std::string_view block_end,
                                      std::string_view call_begin);

// Content passes through until `block_start`; then calls are parsed one at a time by next()
// until it reports the block's end, after which content passes through again. Whitespace
// around a call block is dropped; text that does not parse as calls is given back as content.
class BlockParser : public ToolCallParser {
 public:
  void push(std::string_view text, ParsedOutput& out) final;
  void finish(ParsedOutput& out) final;

 protected:
  // `keep_start`: the marker is also the first call's own opening (GLM's <tool_call>), so next()
  // sees it.
  BlockParser(std::string block_start, bool keep_start)
      : block_start_(std::move(block_start)), keep_start_(keep_start) {}
  // Parses the front of the block text `s` (never empty, never starting with whitespace).
  virtual Step next(std::string_view s) const = 0;

 private:
  void run(ParsedOutput& out);
  void emit_content(std::string_view text, ParsedOutput& out);

  enum class Mode { kContent, kCalls, kPassThrough };
  std::string block_start_;
  bool keep_start_;
  Mode mode_ = Mode::kContent;
  std::string buffer_;            // text not yet decided
  std::string pending_ws_;        // trailing whitespace of the content, dropped if a block follows
  bool after_block_ = false;      // content resumes after a block: skip its leading whitespace
  bool block_untouched_ = false;  // no call of this block parsed yet (the marker is still owed)
  size_t calls_ = 0;
  bool name_sent_ = false;
  size_t args_sent_ = 0;  // bytes of the current call's arguments already sent
};

}  // namespace handoff::text::tool_scan
