#include "handoff/text/tool_call_grammar.h"

#include <algorithm>
#include <limits>
#include <set>

#include "handoff/error.h"

namespace handoff::text {
namespace {

using Node = ToolCallGrammar::Node;

Node literals(std::vector<std::string> texts, std::vector<int> next) {
  Node n;
  n.kind = Node::kLiterals;
  n.literals = std::move(texts);
  n.next_of = std::move(next);
  return n;
}
Node literal(std::string text, int next) { return literals({std::move(text)}, {next}); }
// One of the function names, each followed by `after` (a byte no name has, so no alternative
// is a prefix of another), then `next`.
Node names_then(const std::vector<std::string>& names, const std::string& after, int next) {
  Node n;
  for (const auto& name : names) {
    n.literals.push_back(name + after);
    n.next_of.push_back(next);
  }
  return n;
}
Node json(bool object_only, std::string guard, int next) {
  Node n;
  n.kind = Node::kJson;
  n.object_only = object_only;
  n.guard = std::move(guard);
  n.next = next;
  return n;
}
Node text(std::string terminator, std::string forbidden, bool strict, int next) {
  Node n;
  n.kind = Node::kText;
  n.terminator = std::move(terminator);
  n.forbidden = std::move(forbidden);
  n.strict = strict;
  n.next = next;
  return n;
}

// Control characters: not in a key.
std::string control_bytes() {
  std::string s;
  for (int c = 1; c < 0x20; ++c) s += static_cast<char>(c);
  s += '\0';
  return s;
}

// The fewest tokens that spell text[i..] for each i: every byte is a token of byte-level BPE,
// and longer pieces where the vocabulary (or an added token) has them.
std::vector<uint16_t> spell_costs(const std::string& text, const Tokenizer* tokenizer) {
  constexpr size_t kLongestPiece = 64;
  std::vector<uint16_t> cost(text.size() + 1, 0);
  for (size_t i = text.size(); i-- > 0;) {
    size_t best = cost[i + 1] + 1u;
    if (tokenizer != nullptr)
      for (size_t j = i + 2; j <= text.size() && j - i <= kLongestPiece; ++j)
        if (cost[j] + 1u < best && tokenizer->token_id(std::string_view(text).substr(i, j - i)))
          best = cost[j] + 1u;
    cost[i] = static_cast<uint16_t>(std::min<size_t>(best, UINT16_MAX));
  }
  return cost;
}

}  // namespace

std::shared_ptr<const ToolCallGrammar> ToolCallGrammar::make(ToolCallFormat format,
                                                             const std::vector<std::string>& names,
                                                             const std::string& leading,
                                                             const Tokenizer* tokenizer) {
  if (names.empty() || names.size() > kMaxAlternatives)
    fail_input("a forced tool call needs 1 to {} function names, got {}", kMaxAlternatives,
               names.size());
  if (std::set<std::string>(names.begin(), names.end()).size() != names.size())
    fail_input("a forced tool call's function names must be distinct");
  for (const auto& name : names)
    if (name.empty() || name.find_first_of("<>\"\n|｜ ") != std::string::npos)
      fail_input("function name '{}' cannot be forced in a tool-call format", name);
  std::vector<Node> g;
  switch (format) {
    case ToolCallFormat::kDeepSeekV3:
      // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
      // <｜tool▁call▁end｜><｜tool▁calls▁end｜>
      g.push_back(literal(
          leading + "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>", 1));
      g.push_back(names_then(names, "\n```json\n", 2));
      g.push_back(json(true, "<｜tool▁call▁end｜>", 3));
      g.push_back(literal("\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", -1));
      break;
    case ToolCallFormat::kDeepSeekV31:
      g.push_back(literal(leading + "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>", 1));
      g.push_back(names_then(names, "<｜tool▁sep｜>", 2));
      g.push_back(json(true, "<｜tool▁call▁end｜>", 3));
      g.push_back(literal("<｜tool▁call▁end｜><｜tool▁calls▁end｜>", -1));
      break;
    case ToolCallFormat::kDeepSeekV32: {
      // As the V3.2 template writes calls: a parameter per line, string="true" values as text,
      // string="false" values as JSON.
      const std::string param_end = "</｜DSML｜parameter>";
      g.push_back(literal(leading + "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"", 1));
      g.push_back(names_then(names, "\">\n", 2));
      g.push_back(
          literals({"<｜DSML｜parameter name=\"", "</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
                   {3, -1}));                                              // 2
      g.push_back(text("\" string=\"", control_bytes() + "<>", true, 4));  // 3: the key
      g.push_back(literals({"true\">", "false\">"}, {5, 6}));              // 4
      g.push_back(text(param_end, "", false, 7));                          // 5
      g.push_back(json(false, param_end, 8));                              // 6
      g.push_back(literal("\n", 2));                                       // 7
      g.push_back(literal(param_end + "\n", 2));                           // 8
      break;
    }
    case ToolCallFormat::kGlm45:
      // <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>, as GLM's
      // templates write calls.
      g.push_back(literal(leading + "<tool_call>", 1));
      g.push_back(names_then(names, "<", 2));
      g.push_back(literals({"arg_key>", "/tool_call>"}, {3, -1}));      // 2
      g.push_back(text("</arg_key>", control_bytes() + "<", true, 4));  // 3: the key
      g.push_back(literal("<arg_value>", 5));                           // 4
      g.push_back(text("</arg_value>", "", false, 6));                  // 5
      g.push_back(literals({"<arg_key>", "</tool_call>"}, {3, -1}));    // 6
      break;
    case ToolCallFormat::kNone:
      fail_input("tool_choice \"required\" or a named function needs a tool-call format");
  }
  return std::shared_ptr<const ToolCallGrammar>(new ToolCallGrammar(std::move(g), tokenizer));
}

ToolCallGrammar::ToolCallGrammar(std::vector<Node> nodes, const Tokenizer* tokenizer)
    : nodes_(std::move(nodes)) {
  for (auto& n : nodes_) {
    if (n.kind == Node::kLiterals)
      for (const auto& lit : n.literals) n.costs.push_back(spell_costs(lit, tokenizer));
    else if (n.kind == Node::kText)
      n.costs.push_back(spell_costs(n.terminator, tokenizer));
    // A free text's matcher restarts on the terminator's first byte: it must not recur.
    if (n.kind == Node::kText && !n.strict &&
        n.terminator.find(n.terminator[0], 1) != std::string::npos)
      fail("tool-call grammar: terminator '{}' repeats its first byte", n.terminator);
    if (n.kind == Node::kJson &&
        (n.guard.size() >= 32 ||
         (!n.guard.empty() && n.guard.find(n.guard[0], 1) != std::string::npos)))
      fail("tool-call grammar: bad JSON guard '{}'", n.guard);
  }
  // Shortest lengths to the end: relax until nothing changes (the graph has a few nodes and
  // loops only through non-empty texts).
  constexpr size_t kInf = std::numeric_limits<size_t>::max() / 4;
  min_length_.assign(nodes_.size(), kInf);
  shortest_alt_.assign(nodes_.size(), 0);
  const auto len = [&](int n) { return n < 0 ? 0 : min_length_[static_cast<size_t>(n)]; };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const Node& n = nodes_[i];
      size_t best = kInf;
      size_t alt = 0;
      if (n.kind == Node::kLiterals) {
        for (size_t a = 0; a < n.literals.size(); ++a) {
          const size_t l = n.costs[a][0] + len(n.next_of[a]);
          if (l < best) best = l, alt = a;
        }
      } else if (n.kind == Node::kJson) {
        best = (n.object_only ? 2 : 1) + len(n.next);
      } else {
        best = n.costs[0][0] + len(n.next);
      }
      if (best < min_length_[i]) {
        min_length_[i] = best;
        shortest_alt_[i] = alt;
        changed = true;
      }
    }
  }
}

ToolCallGrammarState::ToolCallGrammarState(const ToolCallGrammar& grammar) : grammar_(&grammar) {
  enter(0);
}

void ToolCallGrammarState::enter(int node) {
  node_ = node;
  offset_ = 0;
  if (node < 0) return;
  const auto& n = grammar_->nodes()[static_cast<size_t>(node)];
  if (n.kind == ToolCallGrammar::Node::kLiterals) {
    alive_.reset();
    for (size_t i = 0; i < n.literals.size(); ++i) alive_.set(i);
  } else if (n.kind == ToolCallGrammar::Node::kJson) {
    json_ = JsonPrefix(n.object_only, n.guard.c_str());
  }
}

bool ToolCallGrammarState::in_literal() const {
  return node_ >= 0 &&
         grammar_->nodes()[static_cast<size_t>(node_)].kind == ToolCallGrammar::Node::kLiterals;
}

bool ToolCallGrammarState::in_plain_text() const {
  if (node_ < 0) return false;
  const auto& n = grammar_->nodes()[static_cast<size_t>(node_)];
  if (n.kind == ToolCallGrammar::Node::kJson) return json_.in_plain_string();
  return n.kind == ToolCallGrammar::Node::kText && !n.strict && offset_ == 0 &&
         n.forbidden.empty() && n.terminator[0] == '<';
}

bool ToolCallGrammarState::feed(uint8_t b) {
  if (node_ < 0) return false;
  const auto& n = grammar_->nodes()[static_cast<size_t>(node_)];
  switch (n.kind) {
    case ToolCallGrammar::Node::kLiterals: {
      auto alive = alive_;
      int completed = -1;
      for (size_t i = 0; i < n.literals.size(); ++i) {
        if (!alive.test(i)) continue;
        const std::string& lit = n.literals[i];
        if (offset_ >= lit.size() || static_cast<uint8_t>(lit[offset_]) != b) {
          alive.reset(i);
        } else if (offset_ + 1 == lit.size()) {
          completed = static_cast<int>(i);
        }
      }
      if (alive.none()) return false;
      if (completed >= 0) {
        enter(n.next_of[static_cast<size_t>(completed)]);
      } else {
        alive_ = alive;
        ++offset_;
      }
      return true;
    }
    case ToolCallGrammar::Node::kJson:
      if (json_.feed(b)) {
        if (json_.closed()) enter(n.next);
        return true;
      }
      // A complete number ends where a byte cannot continue it: that byte is the next node's.
      if (!json_.complete()) return false;
      {
        const ToolCallGrammarState saved = *this;
        enter(n.next);
        if (feed(b)) return true;
        *this = saved;
        return false;
      }
    case ToolCallGrammar::Node::kText: {
      const std::string& t = n.terminator;
      if (static_cast<uint8_t>(t[offset_]) == b) {
        if (++offset_ == t.size()) enter(n.next);
        return true;
      }
      if (n.strict && offset_ > 0) return false;  // the started terminator must go on
      if (b == static_cast<uint8_t>(t[0])) {
        offset_ = 1;
        return true;
      }
      if (n.forbidden.find(static_cast<char>(b)) != std::string::npos) return false;
      offset_ = 0;
      return true;
    }
  }
  return false;
}

bool ToolCallGrammarState::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(static_cast<uint8_t>(c))) return false;
  return true;
}

size_t ToolCallGrammarState::completion_cost() const {
  if (node_ < 0) return 0;
  const auto& n = grammar_->nodes()[static_cast<size_t>(node_)];
  switch (n.kind) {
    case ToolCallGrammar::Node::kLiterals: {
      size_t best = std::numeric_limits<size_t>::max();
      for (size_t i = 0; i < n.literals.size(); ++i)
        if (alive_.test(i))
          best = std::min(best, n.costs[i][offset_] + grammar_->min_length(n.next_of[i]));
      return best;
    }
    case ToolCallGrammar::Node::kJson:
      return json_.completion_length() + grammar_->min_length(n.next);
    case ToolCallGrammar::Node::kText:
      return n.costs[0][offset_] + grammar_->min_length(n.next);
  }
  return 0;
}

std::string ToolCallGrammarState::completion() const {
  std::string out;
  if (node_ < 0) return out;
  const auto& nodes = grammar_->nodes();
  const auto& n = nodes[static_cast<size_t>(node_)];
  int next = -1;
  switch (n.kind) {
    case ToolCallGrammar::Node::kLiterals: {
      size_t best = std::numeric_limits<size_t>::max(), pick = 0;
      for (size_t i = 0; i < n.literals.size(); ++i) {
        if (!alive_.test(i)) continue;
        const size_t l = n.costs[i][offset_] + grammar_->min_length(n.next_of[i]);
        if (l < best) best = l, pick = i;
      }
      out += n.literals[pick].substr(offset_);
      next = n.next_of[pick];
      break;
    }
    case ToolCallGrammar::Node::kJson:
      out += json_.completion();
      next = n.next;
      break;
    case ToolCallGrammar::Node::kText:
      out += n.terminator.substr(offset_);
      next = n.next;
      break;
  }
  // Then each node's shortest text to the end.
  while (next >= 0) {
    const auto& m = nodes[static_cast<size_t>(next)];
    if (m.kind == ToolCallGrammar::Node::kLiterals) {
      const size_t a = grammar_->shortest_alternative(next);
      out += m.literals[a];
      next = m.next_of[a];
    } else if (m.kind == ToolCallGrammar::Node::kJson) {
      out += m.object_only ? "{}" : "0";
      next = m.next;
    } else {
      out += m.terminator;
      next = m.next;
    }
  }
  return out;
}

}  // namespace handoff::text
