#pragma once
// What every rank does in one engine step: first the cache block copies (copy-on-write of
// blocks that forked sequences shared; each rank copies its own part of the rows), then the
// forward over the chunks. The engine builds it; executors carry it to every rank.
#include <vector>

#include "handoff/cache/block_manager.h"
#include "handoff/model/batch.h"

namespace handoff::runtime {

struct Step {
  std::vector<cache::BlockCopy> copies;  // applied in order, before the forward
  std::vector<model::SequenceChunk> chunks;
};

}  // namespace handoff::runtime
