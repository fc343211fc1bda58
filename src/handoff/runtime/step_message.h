#pragma once
// A step's description as bytes, so rank 0 can broadcast it to the worker ranks of an mpirun
// job: the block copies every rank makes first (copy-on-write), then per chunk its tokens, start
// position, block table and whether every token's logits are wanted. The receiver rebuilds the
// step over storage it owns (the engine's block tables live on rank 0 only).
#include <cstdint>
#include <vector>

#include "handoff/cache/block_manager.h"
#include "handoff/model/batch.h"
#include "handoff/runtime/step.h"

namespace handoff::runtime {

std::vector<int64_t> encode_step(const Step& step);

class DecodedStep {
 public:
  // Throws Error on a malformed message (a wrong length or a negative count).
  explicit DecodedStep(std::vector<int64_t> words);
  const Step& step() const { return step_; }

 private:
  std::vector<int64_t> words_;
  std::vector<std::vector<int32_t>> tokens_;
  std::vector<cache::BlockTable> tables_;
  Step step_;
};

}  // namespace handoff::runtime
