#include "handoff/text/utf8.h"

namespace handoff::text {
namespace {

// Expected length of a sequence led by `b`, or 0 when `b` cannot start one.
int sequence_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Whether `second` may follow `lead`; rules out overlongs, surrogates and code points > U+10FFFF,
// exactly the cases in which a lead byte plus continuation bytes can never become a character.
bool valid_second(unsigned char lead, unsigned char second) {
  if ((second & 0xC0) != 0x80) return false;
  if (lead == 0xE0) return second >= 0xA0;
  if (lead == 0xED) return second <= 0x9F;
  if (lead == 0xF0) return second >= 0x90;
  if (lead == 0xF4) return second <= 0x8F;
  return true;
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t complete_utf8_prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  // A character in progress starts at most 3 bytes before the end.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const auto lead = static_cast<unsigned char>(bytes[start]);
    if ((lead & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const int len = sequence_length(lead);
    if (len <= static_cast<int>(back)) return n;  // complete, ASCII or never-valid lead
    if (back >= 2 && !valid_second(lead, static_cast<unsigned char>(bytes[start + 1]))) return n;
    return start;
  }
  return n;
}

char32_t next_code_point(std::string_view s, size_t& pos) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  const int len = sequence_length(lead);
  if (len == 1 || len == 0 || pos + len > s.size() ||
      !valid_second(lead, static_cast<unsigned char>(s[pos + 1]))) {
    ++pos;
    return lead;
  }
  char32_t cp = lead & (0xFF >> (len + 1));
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) {
      ++pos;
      return lead;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  pos += len;
  return cp;
}

}  // namespace handoff::text
