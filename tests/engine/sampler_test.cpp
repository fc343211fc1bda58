#include "handoff/engine/sampler.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "handoff/error.h"

namespace handoff::engine {
namespace {

TEST(Sampler, GreedyTakesFirstMaximum) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  Sampler sampler(1);
  EXPECT_EQ(sampler.sample(logits.data(), 4, {}), 1);
}

TEST(Sampler, TopKAndTopPRestrictTheDraw) {
  const std::vector<float> logits = {3.0f, 2.9f, 0.0f, -5.0f, 1.0f};
  Sampler sampler(7);
  SamplingParams k2{1.0f, 1.0f, 2};
  SamplingParams p_small{1.0f, 0.3f, 0};  // the best token alone holds > 0.3 of the mass
  std::map<int32_t, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[sampler.sample(logits.data(), 5, k2)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[0], 800);
  EXPECT_GT(seen[1], 700);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sampler.sample(logits.data(), 5, p_small), 0);
}

TEST(Sampler, SameSeedSameDraws) {
  const std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.4f};
  Sampler a(42), b(42);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(a.sample(logits.data(), 4, {1.0f, 1.0f, 0}),
              b.sample(logits.data(), 4, {1.0f, 1.0f, 0}));
}

TEST(Sampler, RejectsBadParameters) {
  EXPECT_THROW(validate({-1.0f, 1.0f, 0}), InputError);
  EXPECT_THROW(validate({1.0f, 0.0f, 0}), InputError);
  EXPECT_THROW(validate({1.0f, 1.5f, 0}), InputError);
  EXPECT_THROW(validate({1.0f, 1.0f, -2}), InputError);
}

}  // namespace
}  // namespace handoff::engine
