#include "handoff/runtime/rank_launcher.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "handoff/tensor/thread_pool.h"

namespace handoff::runtime {
namespace {

void run_local(int tp, int pp, std::chrono::milliseconds timeout,
               const std::function<void(comm::Communicator&)>& body) {
  auto world = comm::make_local_world(tp, pp, timeout);
  const int ranks = tp * pp;
  if (ranks == 1) {
    body(*world[0]);
    return;
  }
  // Ranks share the machine: each gets cores / ranks kernel threads, at least one.
  const int threads = std::max(1, tensor::num_threads() / ranks);
  std::mutex mutex;
  std::exception_ptr root_cause, comm_failure;
  std::vector<std::thread> threads_of_ranks;
  for (int r = 0; r < ranks; ++r)
    threads_of_ranks.emplace_back([&, r] {
      tensor::set_num_threads(threads);
      try {
        body(*world[static_cast<size_t>(r)]);
      } catch (const comm::CommError&) {
        std::lock_guard lock(mutex);
        if (!comm_failure) comm_failure = std::current_exception();
      } catch (const std::exception& e) {
        {
          std::lock_guard lock(mutex);
          if (!root_cause) root_cause = std::current_exception();
        }
        world[static_cast<size_t>(r)]->abort(e.what());
      }
    });
  for (auto& t : threads_of_ranks) t.join();
  if (root_cause) std::rethrow_exception(root_cause);
  if (comm_failure) std::rethrow_exception(comm_failure);
}

}  // namespace

void share_cores_with_local_mpi_ranks() {
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local != nullptr)
    tensor::set_num_threads(std::max(1, tensor::num_threads() / std::max(1, std::atoi(local))));
}

void run_ranks(Backend backend, int tp, int pp, std::chrono::milliseconds timeout,
               const std::function<void(comm::Communicator&)>& body) {
  if (backend == Backend::kLocal) {
    run_local(tp, pp, timeout, body);
    return;
  }
  share_cores_with_local_mpi_ranks();
  {
    auto comm = comm::make_mpi_communicator(tp, pp, timeout);
    try {
      body(*comm);
      comm->barrier(comm::Group::kWorld);
    } catch (const std::exception& e) {
      comm->abort(e.what());  // stops every rank of the job; does not return
      throw;
    }
  }
  comm::finalize_mpi();  // after the communicator released its MPI handles
}

}  // namespace handoff::runtime
