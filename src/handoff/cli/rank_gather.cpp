#include "handoff/cli/rank_gather.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "handoff/error.h"

namespace handoff::cli {
namespace {

// Broadcasts `blob` from world rank `from` to every rank (its size first, then its bytes).
std::string broadcast_blob(comm::Communicator& comm, std::string blob, int from) {
  int64_t size = static_cast<int64_t>(blob.size());
  comm.broadcast(comm::Group::kWorld, &size, sizeof size, from);
  blob.resize(static_cast<size_t>(size));
  comm.broadcast(comm::Group::kWorld, blob.data(), blob.size(), from);
  return blob;
}

}  // namespace

void gather_stage_traces(comm::Communicator& comm, const parallel::Plan& plan, int root,
                         std::vector<engine::GenerationResult>& results) {
  const comm::CommCounts own = comm.counts();
  const int tp = plan.options.tp;
  const int me = comm.topology().rank;
  for (const parallel::StagePlan& stage : plan.stages) {
    const int from = stage.stage * tp;  // the stage's first tp rank recorded its layers
    if (from == root) continue;
    std::string blob;
    if (me == from) {
      // Per result: [indexer rows of each layer, expert rows of each layer, per decode step the
      // indexer row of each layer], for this stage's layers only.
      nlohmann::json all = nlohmann::json::array();
      for (const engine::GenerationResult& r : results) {
        nlohmann::json indexer = nlohmann::json::array(), experts = nlohmann::json::array(),
                       decode = nlohmann::json::array();
        for (int64_t l = stage.first_layer; l < stage.end_layer; ++l) {
          indexer.push_back(r.indexer_topk_prefill.at(static_cast<size_t>(l)));
          experts.push_back(r.experts_prefill.at(static_cast<size_t>(l)));
        }
        for (const auto& step : r.indexer_topk_decode) {
          nlohmann::json layers = nlohmann::json::array();
          for (int64_t l = stage.first_layer; l < stage.end_layer; ++l)
            layers.push_back(step.at(static_cast<size_t>(l)));
          decode.push_back(std::move(layers));
        }
        all.push_back({std::move(indexer), std::move(experts), std::move(decode)});
      }
      blob = all.dump();
    }
    blob = broadcast_blob(comm, std::move(blob), from);
    if (me != root) continue;
    const nlohmann::json all = nlohmann::json::parse(blob);
    if (all.size() != results.size())
      fail("rank {} recorded {} generations, rank {} {}", from, all.size(), root, results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      engine::GenerationResult& r = results[i];
      const nlohmann::json& theirs = all[i];
      if (theirs[2].size() != r.indexer_topk_decode.size())
        fail("rank {} recorded {} decode steps of generation {}, rank {} {}", from,
             theirs[2].size(), i, root, r.indexer_topk_decode.size());
      for (int64_t l = stage.first_layer; l < stage.end_layer; ++l) {
        const auto k = static_cast<size_t>(l - stage.first_layer);
        const auto layer = static_cast<size_t>(l);
        theirs[0][k].get_to(r.indexer_topk_prefill.at(layer));
        theirs[1][k].get_to(r.experts_prefill.at(layer));
        for (size_t s = 0; s < r.indexer_topk_decode.size(); ++s)
          theirs[2][s][k].get_to(r.indexer_topk_decode[s].at(layer));
      }
    }
  }
  comm.restore_counts(own);
}

}  // namespace handoff::cli
