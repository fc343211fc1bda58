#pragma once
// How a text is cut into the pieces a stream would deliver, for the tests and fuzz targets that
// feed a streaming parser the same text in different cuts.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace handoff::testing {

// One piece per byte.
inline std::vector<std::string_view> bytes_of(std::string_view text) {
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  return bytes;
}

// Pieces of 1 to max_piece bytes, their sizes from a small linear congruential sequence seeded
// by `seed` (so that the fuzzer picks the cuts with one byte).
inline std::vector<std::string_view> pieces_of(std::string_view text, uint32_t seed,
                                               size_t max_piece) {
  std::vector<std::string_view> pieces;
  for (size_t at = 0; at < text.size();) {
    seed = seed * 1103515245u + 12345u;
    const size_t n = 1 + (seed >> 16) % max_piece;
    pieces.push_back(text.substr(at, n));
    at += n;
  }
  return pieces;
}

}  // namespace handoff::testing
