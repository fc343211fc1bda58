#pragma once
// Accumulates a chat output parser's deltas as an OpenAI client does (by index, concatenating
// argument pieces), checking the delta contract on the way: a call's first delta names it, the
// name is sent once, nothing follows a call's end, indices go up from 0. Shared by the parser
// tests and the fuzz targets (so it reports a breach instead of asserting).
#include <ostream>
#include <string>
#include <vector>

#include "handoff/text/tool_call_parser.h"

namespace handoff::testing {

struct CollectedCall {
  std::string name, arguments;
  bool operator==(const CollectedCall&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const CollectedCall& c) {
  return os << c.name << "(" << c.arguments << ")";
}

struct CollectedOutput {
  std::string content, reasoning;
  std::vector<CollectedCall> calls;
};

struct DeltaCollector {
  CollectedOutput r;
  std::vector<bool> ended;     // per call
  size_t argument_pieces = 0;  // non-empty argument deltas
  std::string breach;          // the first breach of the contract; empty while none

  void add(text::ParsedOutput&& out) {
    r.content += out.content;
    r.reasoning += out.reasoning;
    for (auto& d : out.calls) {
      if (!breach.empty()) return;
      if (d.index == r.calls.size()) {
        if (d.name.empty()) {
          breach = "a call's first delta must carry its name";
          return;
        }
        r.calls.push_back({d.name, ""});
        ended.push_back(false);
      } else if (d.index + 1 != r.calls.size()) {
        breach = "deltas of an earlier call after a later one";
        return;
      } else if (!d.name.empty()) {
        breach = "the name is sent once";
        return;
      }
      if (ended.back()) {
        breach = "a delta after the call's end";
        return;
      }
      if (!d.arguments.empty()) ++argument_pieces;
      r.calls.back().arguments += d.arguments;
      ended.back() = d.end;
    }
  }

  // The completed calls, a prefix of all: after an unfinished call nothing is parsed as one.
  std::vector<CollectedCall> completed() const {
    std::vector<CollectedCall> done;
    for (size_t i = 0; i < r.calls.size() && ended[i]; ++i) done.push_back(r.calls[i]);
    return done;
  }
};

}  // namespace handoff::testing
