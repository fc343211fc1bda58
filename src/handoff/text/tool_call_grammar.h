#pragma once
// The text a forced tool call (tool_choice "required" or a named function) must be: one call in
// the chat template's tool-call format, to one of the allowed functions, whose arguments the
// format's parser turns into a JSON object. A small grammar over bytes (literals, a choice among
// literals, JSON, free text up to a terminator) with a fixed-size, copyable matching state, so a
// constrained sampler can try each token's bytes on a copy of the state.
#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "handoff/text/json_prefix.h"
#include "handoff/text/tokenizer.h"
#include "handoff/text/tool_call_parser.h"

namespace handoff::text {

class ToolCallGrammar {
 public:
  // Most alternatives of one choice (function names: serve allows at most 128 tools).
  static constexpr size_t kMaxAlternatives = 128;

  struct Node {
    enum Kind { kLiterals, kJson, kText } kind = kLiterals;
    // kLiterals: one of these texts (none a prefix of another), then next[i].
    std::vector<std::string> literals;
    std::vector<int> next_of;
    // kJson: a value (an object when object_only) that never contains `guard`.
    bool object_only = false;
    std::string guard;
    // kText: any bytes but `forbidden`, up to and including `terminator`. `strict`: the
    // terminator's first byte cannot be text (it always begins the terminator).
    std::string terminator;
    std::string forbidden;
    bool strict = false;
    int next = -1;  // kJson, kText: the node after; -1: the end
    // kLiterals: per literal, kText: [0] for the terminator: the fewest tokens that spell its
    // bytes from each offset on (bytes when the grammar has no tokenizer).
    std::vector<std::vector<uint16_t>> costs;
  };

  // `names`: the functions the call may name (1..kMaxAlternatives, distinct, none empty);
  // `leading`: text before the call (a closing </think> when the prompt opened one);
  // `tokenizer` (may be null): costs count its tokens, not bytes. Throws InputError for kNone or
  // bad names.
  static std::shared_ptr<const ToolCallGrammar> make(ToolCallFormat format,
                                                     const std::vector<std::string>& names,
                                                     const std::string& leading,
                                                     const Tokenizer* tokenizer = nullptr);

  const std::vector<Node>& nodes() const { return nodes_; }
  // The least cost (see Node::costs; JSON and free text count a token per byte) from the start
  // of node `n` to the end (0 for -1).
  size_t min_length(int n) const { return n < 0 ? 0 : min_length_[static_cast<size_t>(n)]; }
  // The alternative of a kLiterals node that leads to the shortest end.
  size_t shortest_alternative(int n) const { return shortest_alt_[static_cast<size_t>(n)]; }

 private:
  ToolCallGrammar(std::vector<Node> nodes, const Tokenizer* tokenizer);
  std::vector<Node> nodes_;
  std::vector<size_t> min_length_;
  std::vector<size_t> shortest_alt_;
};

// Where a text is in a ToolCallGrammar. Trivially copyable; the grammar must outlive it.
class ToolCallGrammarState {
 public:
  explicit ToolCallGrammarState(const ToolCallGrammar& grammar);

  // Adds one byte; false (the state unchanged) when the text so far plus the byte begins no
  // text of the grammar.
  bool feed(uint8_t byte);
  bool feed(std::string_view bytes);
  // The whole call has been read.
  bool done() const { return node_ < 0; }
  // The next byte would be read by a literal (special tokens may only stand for literals).
  bool in_literal() const;
  // Inside a JSON string or a free text value, where plain text (see
  // JsonPrefix::in_plain_string; no '<', which begins every terminator) changes nothing.
  bool in_plain_text() const;
  // An upper bound on the tokens that end the call from here: the fewest tokens that spell the
  // literals left (bytes without a tokenizer), a token per byte of JSON and terminators. One
  // token (the first of that text) always lowers it by at least one; 0 once done.
  size_t completion_cost() const;
  // The shortest text that ends the call from here (its length in bytes is completion_cost()
  // when the grammar has no tokenizer).
  std::string completion() const;

 private:
  void enter(int node);

  const ToolCallGrammar* grammar_;
  int node_ = 0;
  uint32_t offset_ = 0;  // bytes of the literal / terminator matched so far
  std::bitset<ToolCallGrammar::kMaxAlternatives> alive_;  // literals still matching
  JsonPrefix json_;
};

}  // namespace handoff::text
