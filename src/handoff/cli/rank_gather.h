#pragma once
// What `generate` collects from every rank onto the one that reports (the last stage's first tp
// rank): each rank's collective counts, and the traces (indexer top-k, routed experts) of the
// layers the other stages ran. Both go through world broadcasts, so they work the same for ranks
// as threads and for the processes of an mpirun job; they run after the generation, outside any
// step.
#include <vector>

#include "handoff/comm/communicator.h"
#include "handoff/engine/generator.h"
#include "handoff/parallel/plan.h"

namespace handoff::cli {

// Every rank's collective counts, on `root` (empty elsewhere). The broadcasts doing it are not
// counted: each rank's counts are restored afterwards.
std::vector<comm::CommCounts> gather_counts(comm::Communicator& comm, int root);

// Completes `results` on `root` with the trace rows of every layer: each earlier stage's first tp
// rank sends the rows of its own layers, which replace root's (empty) rows of those layers.
// `results` is every rank's own list of generations (the same prompts on every rank).
void gather_stage_traces(comm::Communicator& comm, const parallel::Plan& plan, int root,
                         std::vector<engine::GenerationResult>& results);

}  // namespace handoff::cli
