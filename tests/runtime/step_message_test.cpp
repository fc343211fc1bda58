// The step description rank 0 broadcasts to the worker ranks of an mpirun job: block copies
// (copy-on-write) and chunks survive the round trip; malformed messages are refused.
#include "handoff/runtime/step_message.h"

#include <gtest/gtest.h>

#include "handoff/error.h"

namespace handoff::runtime {
namespace {

TEST(StepMessage, RoundTripsCopiesAndChunks) {
  const std::vector<int32_t> t1 = {5, 6, 7}, t2 = {9};
  cache::BlockTable b1(std::vector<int32_t>{3, 8}), b2(std::vector<int32_t>{1, 4, 2});
  Step step;
  step.copies = {{4, 6}, {2, 0}};
  step.chunks = {{t1, 13, &b1, false}, {t2, 40, &b2, true}};
  const DecodedStep decoded(encode_step(step));
  const Step& d = decoded.step();
  EXPECT_EQ(d.copies, step.copies);
  ASSERT_EQ(d.chunks.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(std::vector<int32_t>(d.chunks[i].tokens.begin(), d.chunks[i].tokens.end()),
              std::vector<int32_t>(step.chunks[i].tokens.begin(), step.chunks[i].tokens.end()));
    EXPECT_EQ(d.chunks[i].start_pos, step.chunks[i].start_pos);
    EXPECT_EQ(d.chunks[i].all_logits, step.chunks[i].all_logits);
    EXPECT_EQ(d.chunks[i].blocks->blocks(), step.chunks[i].blocks->blocks());
  }
}

TEST(StepMessage, RefusesMalformedMessages) {
  EXPECT_THROW(DecodedStep(std::vector<int64_t>{}), Error);
  EXPECT_THROW(DecodedStep(std::vector<int64_t>{1, 4}), Error);              // a copy cut short
  EXPECT_THROW(DecodedStep(std::vector<int64_t>{1, -1, 2, 0}), Error);       // a negative block
  EXPECT_THROW(DecodedStep(std::vector<int64_t>{0, 1, 0, 0, 5, 0}), Error);  // tokens past the end
  EXPECT_THROW(DecodedStep(std::vector<int64_t>{0, 0, 7}), Error);           // words left over
  EXPECT_NO_THROW(DecodedStep(std::vector<int64_t>{0, 0}));
}

}  // namespace
}  // namespace handoff::runtime
