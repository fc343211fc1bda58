#include "handoff/runtime/count_gather.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace handoff::runtime {

std::vector<comm::CommCounts> gather_counts(comm::Communicator& comm, int root) {
  const comm::CommCounts own = comm.counts();
  const int ranks = comm.topology().world_size();
  std::vector<comm::CommCounts> all(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    std::string blob;
    if (r == comm.topology().rank) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& [key, stats] : own)
        rows.push_back({std::get<0>(key), static_cast<int>(std::get<1>(key)),
                        static_cast<int>(std::get<2>(key)), stats.calls, stats.bytes});
      blob = rows.dump();
    }
    int64_t size = static_cast<int64_t>(blob.size());
    comm.broadcast(comm::Group::kWorld, &size, sizeof size, r);
    blob.resize(static_cast<size_t>(size));
    comm.broadcast(comm::Group::kWorld, blob.data(), blob.size(), r);
    if (comm.topology().rank != root) continue;
    for (const auto& row : nlohmann::json::parse(blob))
      all[static_cast<size_t>(r)]
         [{row[0].get<std::string>(), static_cast<comm::Op>(row[1].get<int>()),
           static_cast<comm::Group>(row[2].get<int>())}] =
             comm::CallStats{row[3].get<int64_t>(), row[4].get<int64_t>()};
  }
  comm.restore_counts(own);
  return comm.topology().rank == root ? all : std::vector<comm::CommCounts>{};
}

comm::CommCounts sum_counts(const std::vector<comm::CommCounts>& per_rank) {
  comm::CommCounts total;
  for (const auto& counts : per_rank)
    for (const auto& [key, stats] : counts) {
      total[key].calls += stats.calls;
      total[key].bytes += stats.bytes;
    }
  return total;
}

}  // namespace handoff::runtime
