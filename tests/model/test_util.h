#pragma once
// Helpers shared by the model tests: temp folders, golden paths, checked InputErrors.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>

#include "handoff/error.h"

namespace handoff::model::testing {

inline std::string golden_dir(const std::string& name) {
  return std::string(HANDOFF_TEST_DATA) + "/golden/" + name;
}

// A fresh folder under the system temp dir, removed with its content on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("handoff_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs `fn`, expecting an InputError whose message contains every one of `parts`.
inline void expect_input_error(const std::function<void()>& fn,
                               std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks '" << p << "': " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
}

}  // namespace handoff::model::testing
