// Byte counts on the command line: SI units are powers of 1000, IEC units powers of 1024, and
// anything else is an InputError naming the flag.
#include "handoff/cli/byte_size_flag.h"

#include <gtest/gtest.h>

#include "handoff/error.h"

namespace handoff::cli {
namespace {

int64_t bytes(const char* text, bool allow_zero = false) {
  return byte_size_flag("--mem-per-rank", text, allow_zero);
}

TEST(ByteSizeFlag, SiAndIecUnits) {
  EXPECT_EQ(bytes("123"), 123);
  EXPECT_EQ(bytes("123B"), 123);
  EXPECT_EQ(bytes("80G"), 80'000'000'000);
  EXPECT_EQ(bytes("80GB"), 80'000'000'000);
  EXPECT_EQ(bytes("80gb"), 80'000'000'000);
  EXPECT_EQ(bytes("141GiB"), int64_t{141} << 30);
  EXPECT_EQ(bytes("141gib"), int64_t{141} << 30);
  EXPECT_EQ(bytes("4k"), 4000);
  EXPECT_EQ(bytes("4KiB"), 4096);
  EXPECT_EQ(bytes("2M"), 2'000'000);
  EXPECT_EQ(bytes("2MiB"), 2 << 20);
  EXPECT_EQ(bytes("1.5T"), 1'500'000'000'000);
  EXPECT_EQ(bytes("1.5TiB"), int64_t{3} << 39);
  EXPECT_EQ(bytes("0.1G"), 100'000'000);  // exact, not 99999999 through a double
  EXPECT_EQ(bytes("0", true), 0);
}

TEST(ByteSizeFlag, BadValuesNameTheFlag) {
  for (const char* text : {"", "0", "0G", "-5G", "-1", "+3", "G", "12XB", "12 G", "1.2.3G", "80Gi",
                           "9223372036854775808", "9999999T", "1e9", "nan"}) {
    try {
      bytes(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--mem-per-rank"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace handoff::cli
