#pragma once
// What `generate` collects onto the rank that reports (the last stage's first tp rank): the
// traces (indexer top-k, routed experts) of the layers the other stages ran. It goes through
// world broadcasts, so it works the same for ranks as threads and for the processes of an mpirun
// job; it runs after the generation, outside any step.
#include <vector>

#include "handoff/comm/communicator.h"
#include "handoff/engine/generator.h"
#include "handoff/parallel/plan.h"

namespace handoff::cli {

// Completes `results` on `root` with the trace rows of every layer: each earlier stage's first tp
// rank sends the rows of its own layers, which replace root's (empty) rows of those layers.
// `results` is every rank's own list of generations (the same prompts on every rank). The
// broadcasts are not counted.
void gather_stage_traces(comm::Communicator& comm, const parallel::Plan& plan, int root,
                         std::vector<engine::GenerationResult>& results);

}  // namespace handoff::cli
