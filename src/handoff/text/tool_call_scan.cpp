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
      return Step{Step::kInvalid, 0, "", ""};
    case Match::kYes:
      break;
  }
  return std::nullopt;
}

std::string dump_object(const nlohmann::ordered_json& object) {
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string partial_object(const nlohmann::ordered_json& done, const std::string* key,
                           std::string_view value, std::string_view value_end) {
  const bool pending = key != nullptr && !done.contains(*key);
  if (done.empty() && !pending) return "";
  std::string out = dump_object(done);
  out.pop_back();  // the closing brace: more may follow
  if (!pending) return out;
  value.remove_suffix(partial_suffix(value, value_end));
  // An unfinished UTF-8 character waits for its other bytes.
  for (size_t back = 1; back <= 3 && back <= value.size(); ++back) {
    const auto c = static_cast<unsigned char>(value[value.size() - back]);
    if ((c & 0xC0) == 0x80) continue;
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > back) value.remove_suffix(back);
    break;
  }
  if (!done.empty()) out += ',';
  out += nlohmann::json(*key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += ':';
  std::string text = nlohmann::json(std::string(value))
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.pop_back();  // the closing quote
  out += text;
  return out;
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
          out.calls.push_back({calls_, std::move(step.name), "", false});
          name_sent_ = true;
        }
        // The arguments as far as they are certain (a prefix of the final text).
        if (name_sent_ && step.arguments.size() > args_sent_) {
          out.calls.push_back({calls_, "", step.arguments.substr(args_sent_), false});
          args_sent_ = step.arguments.size();
        }
        return;
      case Step::kCall:
        if (!name_sent_) out.calls.push_back({calls_, std::move(step.name), "", false});
        out.calls.push_back(
            {calls_, "",
             step.arguments.size() > args_sent_ ? step.arguments.substr(args_sent_) : "", true});
        ++calls_;
        name_sent_ = false;
        args_sent_ = 0;
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
