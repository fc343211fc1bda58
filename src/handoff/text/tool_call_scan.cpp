#include "handoff/text/tool_call_scan.h"

namespace handoff::text::tool_scan {

Match match_at(std::string_view s, std::string_view marker) {
  if (s.size() >= marker.size())
    return s.substr(0, marker.size()) == marker ? Match::kYes : Match::kNo;
  return marker.substr(0, s.size()) == s ? Match::kPartial : Match::kNo;
}

size_t partial_suffix(std::string_view s, std::string_view marker) {
  const size_t longest = std::min(s.size(), marker.size() - 1);
  for (size_t n = longest; n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

Match Cursor::literal(std::string_view marker) {
  const Match m = match_at(s.substr(pos), marker);
  if (m == Match::kYes) pos += marker.size();
  return m;
}

Match Cursor::until(std::string_view delimiter, std::string& out) {
  const size_t at = s.find(delimiter, pos);
  if (at == std::string_view::npos) return Match::kPartial;
  out.assign(s.substr(pos, at - pos));
  pos = at + delimiter.size();
  return Match::kYes;
}

std::optional<Step> block_end_or_call(Cursor& c, std::string_view block_end,
                                      std::string_view call_begin) {
  switch (c.literal(block_end)) {
    case Match::kYes:
      return Step{Step::kEnd, c.pos, "", ""};
    case Match::kPartial:
      return Step{};
    case Match::kNo:
      break;
  }
  switch (c.literal(call_begin)) {
    case Match::kPartial:
      return Step{};
    case Match::kNo:
      return Step{Step::kInvalid};
    case Match::kYes:
      break;
  }
  return std::nullopt;
}

void BlockParser::emit_content(std::string_view text, ParsedOutput& out) {
  if (after_block_) {
    // The whitespace after a call block is not content either.
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    after_block_ = false;
  }
  if (text.empty()) return;
  size_t keep = text.size();
  while (keep > 0 && is_space(text[keep - 1])) --keep;
  if (keep == 0) {
    pending_ws_ += text;
    return;
  }
  out.content += pending_ws_;
  pending_ws_.clear();
  out.content += text.substr(0, keep);
  pending_ws_.assign(text.substr(keep));
}

void BlockParser::push(std::string_view text, ParsedOutput& out) {
  if (mode_ == Mode::kPassThrough) {
    out.content += text;
    return;
  }
  buffer_ += text;
  run(out);
}

void BlockParser::run(ParsedOutput& out) {
  while (true) {
    if (mode_ == Mode::kContent) {
      const size_t at = buffer_.find(block_start_);
      if (at == std::string::npos) {
        const size_t emit = buffer_.size() - partial_suffix(buffer_, block_start_);
        emit_content(std::string_view(buffer_).substr(0, emit), out);
        buffer_.erase(0, emit);
        return;
      }
      emit_content(std::string_view(buffer_).substr(0, at), out);
      pending_ws_.clear();  // the whitespace before a call block is not content
      buffer_.erase(0, keep_start_ ? at : at + block_start_.size());
      mode_ = Mode::kCalls;
      block_untouched_ = true;
      continue;
    }
    size_t ws = 0;
    while (ws < buffer_.size() && is_space(buffer_[ws])) ++ws;
    if (ws == buffer_.size()) return;
    Step step = next(std::string_view(buffer_).substr(ws));
    switch (step.kind) {
      case Step::kNeedMore:
        if (!step.name.empty() && !name_sent_) {
          out.calls.push_back({calls_, std::move(step.name), ""});
          name_sent_ = true;
        }
        return;
      case Step::kCall:
        if (!name_sent_) out.calls.push_back({calls_, std::move(step.name), ""});
        out.calls.push_back({calls_, "", std::move(step.arguments)});
        ++calls_;
        name_sent_ = false;
        block_untouched_ = false;
        buffer_.erase(0, ws + step.consumed);
        continue;
      case Step::kEnd:
        buffer_.erase(0, ws + step.consumed);
        mode_ = Mode::kContent;
        after_block_ = true;
        continue;
      case Step::kInvalid:
        // Not the format after all: what is left is text for the user, as written.
        if (block_untouched_ && !keep_start_) out.content += block_start_;
        out.content += buffer_;
        buffer_.clear();
        mode_ = Mode::kPassThrough;
        return;
    }
  }
}

void BlockParser::finish(ParsedOutput& out) {
  if (mode_ == Mode::kContent) {
    out.content += pending_ws_;
    out.content += buffer_;
  } else if (mode_ == Mode::kCalls && !trim(buffer_).empty()) {
    // An unfinished call: the output was cut (length) or malformed; show it as written.
    if (block_untouched_ && !keep_start_) out.content += block_start_;
    out.content += buffer_;
  }
  pending_ws_.clear();
  buffer_.clear();
}

}  // namespace handoff::text::tool_scan
