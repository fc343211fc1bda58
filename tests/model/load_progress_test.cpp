#include "handoff/model/load_progress.h"

#include <gtest/gtest.h>

namespace handoff::model {
namespace {

TEST(LoadProgressTest, CountsAndClamps) {
  LoadProgress p(1000);
  p.advance(400);
  EXPECT_EQ(p.done_bytes(), 400u);
  p.advance(800);
  EXPECT_EQ(p.done_bytes(), 1000u);
  p.finish();
  p.finish();  // idempotent
}

}  // namespace
}  // namespace handoff::model
