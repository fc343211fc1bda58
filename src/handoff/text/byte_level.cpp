#include "handoff/text/byte_level.h"

#include <array>

#include "handoff/text/utf8.h"

namespace handoff::text {
namespace {

// The GPT-2 table: printable Latin-1 bytes map to themselves, the rest to U+0100 upwards.
std::array<char32_t, 256> byte_to_code_point() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

const std::array<char32_t, 256>& table() {
  static const std::array<char32_t, 256> t = byte_to_code_point();
  return t;
}

}  // namespace

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(out, table()[b]);
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view spelling) {
  std::string out;
  size_t pos = 0;
  while (pos < spelling.size()) {
    const char32_t cp = next_code_point(spelling, pos);
    int byte = -1;
    if (cp < 256 && table()[cp] == cp) {
      byte = static_cast<int>(cp);
    } else if (cp >= 256 && cp < 256 + 68) {
      for (int b = 0; b < 256; ++b)
        if (table()[b] == cp) byte = b;
    }
    if (byte < 0) return std::nullopt;
    out += static_cast<char>(byte);
  }
  return out;
}

}  // namespace handoff::text
