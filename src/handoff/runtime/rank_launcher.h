#pragma once
// Starts the ranks of a run. Local backend: every rank is a thread of this process with its own
// communicator and cores / ranks kernel threads (at least one). MPI backend: this process is one
// rank of an mpirun job. A rank that throws aborts the world, so the others stop with an error
// naming it instead of waiting forever.
#include <chrono>
#include <functional>

#include "handoff/comm/communicator.h"

namespace handoff::runtime {

enum class Backend { kLocal, kMpi };

// Runs body(comm) on every rank (local) or on this process's rank (MPI) and returns when all are
// done. Rethrows the first failure, preferring a rank's own error over the CommErrors it caused
// on the others.
void run_ranks(Backend backend, int tp, int pp, std::chrono::milliseconds timeout,
               const std::function<void(comm::Communicator&)>& body);

// MPI ranks on one host share its cores like local ranks do: kernel threads = the current
// count (all cores, or --threads) / the ranks mpirun placed on this host
// (OMPI_COMM_WORLD_LOCAL_SIZE), at least one.
void share_cores_with_local_mpi_ranks();

}  // namespace handoff::runtime
