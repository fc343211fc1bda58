#pragma once
// Every rank's collective counts onto one rank, for processes that cannot see each other's
// counts (an mpirun job): each rank in turn broadcasts its counts to the world.
#include <vector>

#include "handoff/comm/communicator.h"

namespace handoff::runtime {

// Every rank's counts (index = world rank) on `root`, empty elsewhere. Every rank of the world
// calls it together. The broadcasts doing it are not counted: each rank's counts are restored.
std::vector<comm::CommCounts> gather_counts(comm::Communicator& comm, int root);

// The per-(scope, op, group) sum over ranks.
comm::CommCounts sum_counts(const std::vector<comm::CommCounts>& per_rank);

}  // namespace handoff::runtime
