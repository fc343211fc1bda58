#pragma once
// An incremental JSON validator over bytes: it accepts exactly the byte strings that are a
// prefix of some valid JSON value (RFC 8259, UTF-8, no lone surrogates; numbers bounded so that
// each is a finite double: at most 200 integer digits and a two-digit exponent, since common
// parsers, nlohmann's among them, refuse numbers that overflow), and tells the length of
// the shortest text that completes the value. Constrained decoding feeds it one token's bytes at
// a time on a copy of its state, so the state is small, fixed-size and trivially copyable.
#include <cstddef>
#include <cstdint>
#include <string>

namespace handoff::text {

class JsonPrefix {
 public:
  // Deepest nesting of arrays and objects accepted (deeper text is rejected).
  static constexpr int kMaxDepth = 64;

  // `object_only`: the value must be an object (tool-call arguments). `guard` (may be empty,
  // at most 31 bytes, its first byte appearing once in it): a text the JSON must never
  // contain (the marker that ends it in a tool call, which a parser would stop at).
  explicit JsonPrefix(bool object_only = false, const char* guard = "");

  // Adds one byte; false (the state unchanged) when no valid JSON begins with the text so far
  // plus this byte. Whitespace before the value and after it is rejected: the caller frames it.
  bool feed(uint8_t byte);
  bool feed(const std::string& bytes);

  // A whole value has been read and nothing can follow (a closed object, array, string or
  // literal).
  bool closed() const { return mode_ == Mode::kDone; }
  // Inside a string, between characters, with no part of the guard matched: text free of '"',
  // '\\', '<', control characters and broken UTF-8 leaves the state as it is.
  bool in_plain_string() const { return mode_ == Mode::kString && guard_matched_ == 0; }
  // A whole value has been read (closed, or a top-level number that could still go on).
  bool complete() const;
  // The length of the shortest text that makes the value complete (0 when complete()).
  size_t completion_length() const;
  // That text (tests, and callers that must close a value).
  std::string completion() const;

 private:
  enum class Mode : uint8_t {
    kStart,         // the value's first byte
    kValue,         // a value (after ':' or ',' in an array)
    kArrayFirst,    // after '[': a value or ']'
    kObjectFirst,   // after '{': a key or '}'
    kObjectKey,     // after ',' in an object: a key
    kColon,         // after a key
    kAfter,         // after a value inside a container: ',' or its closer
    kString,        // inside a string
    kEscape,        // after '\' in a string
    kHex,           // inside \uXXXX (hex_left_ digits to go)
    kLowBackslash,  // after a high surrogate escape: '\' of the low one
    kLowU,          // then 'u'
    kUtf8,          // inside a multi-byte UTF-8 character (utf8_left_ bytes to go)
    kMinus,
    kZero,
    kInt,
    kDot,
    kFrac,
    kExpMark,
    kExpSign,
    kExpDigits,  // a number
    kLiteral,    // inside true / false / null
    kDone,
  };

  bool in_object() const { return depth_ > 0 && ((stack_ >> (depth_ - 1)) & 1) != 0; }
  bool push(bool object);
  // A value ended: back to its container, or done.
  void end_value() { mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfter; }
  bool begin_value(uint8_t byte);
  bool step(uint8_t byte);
  // The shortest completion of the innermost scalar or key, without the containers' closers.
  size_t scalar_completion_length() const;
  void scalar_completion(std::string& out) const;
  size_t string_tail() const { return key_ ? 3 : 1; }  // `":0` or `"`

  Mode mode_ = Mode::kStart;
  bool object_only_ = false;
  bool key_ = false;       // the string being read is an object key
  bool need_low_ = false;  // the \u escape being read must be a low surrogate
  uint8_t depth_ = 0;
  uint8_t hex_left_ = 0;
  uint16_t hex_value_ = 0;
  uint8_t utf8_left_ = 0;
  uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // the range of the next continuation byte
  uint8_t literal_ = 0;                      // 0 true, 1 false, 2 null
  uint8_t literal_pos_ = 0;
  uint8_t digits_ = 0;  // digits of the integer part / the exponent so far
  uint8_t guard_len_ = 0;
  uint8_t guard_matched_ = 0;
  uint64_t stack_ = 0;  // bit i: level i is an object (1) or an array (0)
  char guard_[32] = {};
};

}  // namespace handoff::text
