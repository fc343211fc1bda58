#pragma once
// A random-weight model with the real DeepSeek-V3 tokenizer (text in, text out), made once per
// machine in the temp folder and shared by the tests that need text: made under a private name,
// then renamed, so tests running in parallel never see a half-written folder.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "../cli/cli_support.h"
#include "../text/text_test_support.h"

namespace handoff::testing {

inline std::string small_text_model() {
  const auto dir = std::filesystem::temp_directory_path() / "handoff_surface_small_text";
  if (std::filesystem::exists(dir / "tokenizer.json")) return dir.string();
  const auto tmp = dir.string() + ".tmp" + std::to_string(::getpid());
  const auto made = run_handoff(
      "make-model --family deepseek_v32 --preset small-text --seed 1 --dtype f32 --out " + tmp +
      " --tokenizer-from " + deepseek_v3_dir().string());
  EXPECT_EQ(made.exit_code, 0) << made.output;
  std::error_code ec;
  std::filesystem::rename(tmp, dir, ec);
  if (ec) std::filesystem::remove_all(tmp);  // another test made it first
  return dir.string();
}

}  // namespace handoff::testing
