#include "handoff/text/json_prefix.h"

#include <cstring>

namespace handoff::text {
namespace {

constexpr const char* kLiterals[] = {"true", "false", "null"};
constexpr uint8_t kLiteralLengths[] = {4, 5, 4};

bool is_ws(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
int hex_digit(uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

}  // namespace

JsonPrefix::JsonPrefix(bool object_only, const char* guard) : object_only_(object_only) {
  const size_t n = std::strlen(guard);
  guard_len_ = static_cast<uint8_t>(n < sizeof(guard_) ? n : sizeof(guard_) - 1);
  std::memcpy(guard_, guard, guard_len_);
}

bool JsonPrefix::push(bool object) {
  if (depth_ >= kMaxDepth) return false;
  if (object)
    stack_ |= uint64_t{1} << depth_;
  else
    stack_ &= ~(uint64_t{1} << depth_);
  ++depth_;
  mode_ = object ? Mode::kObjectFirst : Mode::kArrayFirst;
  return true;
}

bool JsonPrefix::begin_value(uint8_t b) {
  switch (b) {
    case '{':
      return push(true);
    case '[':
      return push(false);
    case '"':
      key_ = false;
      mode_ = Mode::kString;
      return true;
    case '-':
      mode_ = Mode::kMinus;
      return true;
    case '0':
      mode_ = Mode::kZero;
      return true;
    case 't':
    case 'f':
    case 'n':
      literal_ = b == 't' ? 0 : b == 'f' ? 1 : 2;
      literal_pos_ = 1;
      mode_ = Mode::kLiteral;
      return true;
    default:
      if (b >= '1' && b <= '9') {
        mode_ = Mode::kInt;
        digits_ = 1;
        return true;
      }
      return false;
  }
}

bool JsonPrefix::step(uint8_t b) {
  switch (mode_) {
    case Mode::kStart:
      if (object_only_) return b == '{' && push(true);
      return begin_value(b);
    case Mode::kValue:
      return is_ws(b) || begin_value(b);
    case Mode::kArrayFirst:
      if (is_ws(b)) return true;
      if (b == ']') {
        --depth_;
        end_value();
        return true;
      }
      return begin_value(b);
    case Mode::kObjectFirst:
    case Mode::kObjectKey:
      if (is_ws(b)) return true;
      if (b == '}' && mode_ == Mode::kObjectFirst) {
        --depth_;
        end_value();
        return true;
      }
      if (b != '"') return false;
      key_ = true;
      mode_ = Mode::kString;
      return true;
    case Mode::kColon:
      if (is_ws(b)) return true;
      if (b != ':') return false;
      mode_ = Mode::kValue;
      return true;
    case Mode::kAfter:
      if (is_ws(b)) return true;
      if (b == ',') {
        mode_ = in_object() ? Mode::kObjectKey : Mode::kValue;
        return true;
      }
      if (b == (in_object() ? '}' : ']')) {
        --depth_;
        end_value();
        return true;
      }
      return false;
    case Mode::kString:
      if (b == '"') {
        if (key_) {
          key_ = false;
          mode_ = Mode::kColon;
        } else {
          end_value();
        }
        return true;
      }
      if (b == '\\') {
        mode_ = Mode::kEscape;
        return true;
      }
      if (b < 0x20) return false;  // control characters must be escaped
      if (b < 0x80) return true;
      // The lead byte of a multi-byte character: how many bytes follow, and the range of the
      // first one (no overlong forms, no surrogates, nothing above U+10FFFF).
      utf8_lo_ = 0x80;
      utf8_hi_ = 0xBF;
      if (b >= 0xC2 && b <= 0xDF) {
        utf8_left_ = 1;
      } else if (b >= 0xE0 && b <= 0xEF) {
        utf8_left_ = 2;
        if (b == 0xE0) utf8_lo_ = 0xA0;
        if (b == 0xED) utf8_hi_ = 0x9F;
      } else if (b >= 0xF0 && b <= 0xF4) {
        utf8_left_ = 3;
        if (b == 0xF0) utf8_lo_ = 0x90;
        if (b == 0xF4) utf8_hi_ = 0x8F;
      } else {
        return false;
      }
      mode_ = Mode::kUtf8;
      return true;
    case Mode::kUtf8:
      if (b < utf8_lo_ || b > utf8_hi_) return false;
      utf8_lo_ = 0x80;
      utf8_hi_ = 0xBF;
      if (--utf8_left_ == 0) mode_ = Mode::kString;
      return true;
    case Mode::kEscape:
      if (b == 'u') {
        mode_ = Mode::kHex;
        hex_left_ = 4;
        hex_value_ = 0;
        return true;
      }
      if (std::strchr("\"\\/bfnrt", b) == nullptr || b == 0) return false;
      mode_ = Mode::kString;
      return true;
    case Mode::kHex: {
      const int d = hex_digit(b);
      if (d < 0) return false;
      const int typed = 4 - hex_left_;
      if (need_low_) {  // DC00..DFFF
        if (typed == 0 && d != 0xD) return false;
        if (typed == 1 && d < 0xC) return false;
      } else if (typed == 1 && hex_value_ == 0xD && d >= 0xC) {
        return false;  // a low surrogate with no high one before it
      }
      hex_value_ = static_cast<uint16_t>(hex_value_ * 16 + d);
      if (--hex_left_ > 0) return true;
      if (need_low_) {
        need_low_ = false;
        mode_ = Mode::kString;
      } else {
        mode_ = hex_value_ >= 0xD800 && hex_value_ <= 0xDBFF ? Mode::kLowBackslash : Mode::kString;
      }
      return true;
    }
    case Mode::kLowBackslash:
      if (b != '\\') return false;
      mode_ = Mode::kLowU;
      return true;
    case Mode::kLowU:
      if (b != 'u') return false;
      mode_ = Mode::kHex;
      hex_left_ = 4;
      hex_value_ = 0;
      need_low_ = true;
      return true;
    case Mode::kMinus:
      if (b == '0') {
        mode_ = Mode::kZero;
        return true;
      }
      if (b >= '1' && b <= '9') {
        mode_ = Mode::kInt;
        digits_ = 1;
        return true;
      }
      return false;
    case Mode::kZero:
    case Mode::kInt:
    case Mode::kFrac:
    case Mode::kExpDigits:
      if (is_digit(b) && mode_ != Mode::kZero) {
        // Bounded so that the number stays a finite double (1e299 at most).
        if (mode_ == Mode::kInt && digits_ >= 200) return false;
        if (mode_ == Mode::kExpDigits && digits_ >= 2) return false;
        if (mode_ != Mode::kFrac) ++digits_;
        return true;
      }
      if (b == '.' && (mode_ == Mode::kZero || mode_ == Mode::kInt)) {
        mode_ = Mode::kDot;
        return true;
      }
      if ((b == 'e' || b == 'E') && mode_ != Mode::kExpDigits) {
        mode_ = Mode::kExpMark;
        return true;
      }
      // The number ended: the byte belongs to its container (a top-level number is complete
      // and the caller takes the byte elsewhere).
      if (depth_ == 0) return false;
      end_value();
      return step(b);
    case Mode::kDot:
      if (!is_digit(b)) return false;
      mode_ = Mode::kFrac;
      return true;
    case Mode::kExpMark:
      if (b == '+' || b == '-') {
        mode_ = Mode::kExpSign;
        return true;
      }
      [[fallthrough]];
    case Mode::kExpSign:
      if (!is_digit(b)) return false;
      mode_ = Mode::kExpDigits;
      digits_ = 1;
      return true;
    case Mode::kLiteral:
      if (b != static_cast<uint8_t>(kLiterals[literal_][literal_pos_])) return false;
      if (++literal_pos_ == kLiteralLengths[literal_]) end_value();
      return true;
    case Mode::kDone:
      return false;
  }
  return false;
}

bool JsonPrefix::feed(uint8_t b) {
  const JsonPrefix saved = *this;
  bool ok = step(b);
  if (ok && guard_len_ > 0) {
    // The guard's first byte does not recur in it, so a mismatch restarts the match here.
    if (b == static_cast<uint8_t>(guard_[guard_matched_]))
      ok = ++guard_matched_ < guard_len_;
    else
      guard_matched_ = b == static_cast<uint8_t>(guard_[0]) ? 1 : 0;
  }
  if (!ok) *this = saved;
  return ok;
}

bool JsonPrefix::feed(const std::string& bytes) {
  for (char c : bytes)
    if (!feed(static_cast<uint8_t>(c))) return false;
  return true;
}

bool JsonPrefix::complete() const {
  if (mode_ == Mode::kDone) return true;
  return depth_ == 0 && (mode_ == Mode::kZero || mode_ == Mode::kInt || mode_ == Mode::kFrac ||
                         mode_ == Mode::kExpDigits);
}

size_t JsonPrefix::scalar_completion_length() const {
  switch (mode_) {
    case Mode::kStart:
      return object_only_ ? 2 : 1;
    case Mode::kValue:
    case Mode::kMinus:
    case Mode::kDot:
    case Mode::kExpMark:
    case Mode::kExpSign:
      return 1;
    case Mode::kObjectKey:
      return 4;  // "":0
    case Mode::kColon:
      return 2;  // :0
    case Mode::kString:
      return string_tail();
    case Mode::kEscape:
      return 1 + string_tail();
    case Mode::kHex: {
      const int typed = 4 - hex_left_;
      // Two typed digits D8..DB make a high surrogate, which needs a low one after it.
      const bool high = !need_low_ && typed >= 2 && (hex_value_ >> (4 * (typed - 2))) >= 0xD8 &&
                        (hex_value_ >> (4 * (typed - 2))) <= 0xDB;
      return hex_left_ + (high ? 6 : 0) + string_tail();
    }
    case Mode::kLowBackslash:
      return 6 + string_tail();
    case Mode::kLowU:
      return 5 + string_tail();
    case Mode::kUtf8:
      return utf8_left_ + string_tail();
    case Mode::kLiteral:
      return kLiteralLengths[literal_] - literal_pos_;
    case Mode::kArrayFirst:
    case Mode::kObjectFirst:
    case Mode::kAfter:
    case Mode::kZero:
    case Mode::kInt:
    case Mode::kFrac:
    case Mode::kExpDigits:
    case Mode::kDone:
      return 0;
  }
  return 0;
}

void JsonPrefix::scalar_completion(std::string& out) const {
  const char* tail = key_ ? "\":0" : "\"";
  switch (mode_) {
    case Mode::kStart:
      out += object_only_ ? "{}" : "0";
      return;
    case Mode::kValue:
    case Mode::kMinus:
    case Mode::kDot:
    case Mode::kExpMark:
    case Mode::kExpSign:
      out += '0';
      return;
    case Mode::kObjectKey:
      out += "\"\":0";
      return;
    case Mode::kColon:
      out += ":0";
      return;
    case Mode::kString:
      out += tail;
      return;
    case Mode::kEscape:
      out += 'n';
      out += tail;
      return;
    case Mode::kHex: {
      const int typed = 4 - hex_left_;
      if (need_low_) {
        out += std::string("DC00").substr(static_cast<size_t>(typed));
      } else {
        out.append(hex_left_, '0');
        const bool high = typed >= 2 && (hex_value_ >> (4 * (typed - 2))) >= 0xD8 &&
                          (hex_value_ >> (4 * (typed - 2))) <= 0xDB;
        if (high) out += "\\uDC00";
      }
      out += tail;
      return;
    }
    case Mode::kLowBackslash:
      out += "\\uDC00";
      out += tail;
      return;
    case Mode::kLowU:
      out += "uDC00";
      out += tail;
      return;
    case Mode::kUtf8:
      out += static_cast<char>(utf8_lo_);
      out.append(utf8_left_ - 1u, static_cast<char>(0x80));
      out += tail;
      return;
    case Mode::kLiteral:
      out += kLiterals[literal_] + literal_pos_;
      return;
    default:
      return;
  }
}

size_t JsonPrefix::completion_length() const {
  if (mode_ == Mode::kDone) return 0;
  return scalar_completion_length() + depth_;
}

std::string JsonPrefix::completion() const {
  std::string out;
  if (mode_ == Mode::kDone) return out;
  scalar_completion(out);
  for (int level = depth_ - 1; level >= 0; --level) out += ((stack_ >> level) & 1) != 0 ? '}' : ']';
  return out;
}

}  // namespace handoff::text
