#pragma once
// Runs one function per rank of a local world, each on its own thread, and collects what each
// rank threw, so tests can assert on every rank's outcome.
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "handoff/comm/communicator.h"

namespace handoff::comm::testing {

// Returns each rank's error message ("" when it returned normally).
inline std::vector<std::string> run_ranks(std::vector<std::unique_ptr<Communicator>>& comms,
                                          const std::function<void(Communicator&)>& body) {
  std::vector<std::string> errors(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(*comms[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "(empty error)";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace handoff::comm::testing
