// The runner's token-count contract with real forwards: for every family, tp in {1,2,4}, both
// boundary contracts and n in 1..40, pp_intermediate_token_count(n) == rows the stage sends ==
// rows the next stage receives == rows of the profiling pass's hand-off.
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "../engine/golden_support.h"
#include "handoff/model/model.h"
#include "handoff/model/model_maker.h"
#include "handoff/runtime/rank_launcher.h"
#include "parallel_support.h"

namespace handoff::testing {
namespace {

std::string family_model(const std::string& family) {
  if (family == "deepseek_v32") return golden_dir("dsv32_tiny_sparse");
  if (family == "glm_moe_dsa") return golden_dir("glm5_tiny_sparse");
  static std::once_flag once;
  static const std::string dir =
      (std::filesystem::temp_directory_path() / "handoff_shape_contract_deepseek_v3").string();
  std::call_once(once, [] {
    std::filesystem::remove_all(dir);
    model::MakeModelOptions o;
    o.config = model::preset_config("tiny", model::Family::kDeepseekV3);
    o.seed = 3;
    o.dtype = tensor::DType::kF32;
    o.out_dir = dir;
    model::make_model(o);
  });
  return dir;
}

TEST(ShapeContract, RowsSentReceivedAndProfiledFollowTheContract) {
  for (const std::string family : {"deepseek_v32", "glm_moe_dsa", "deepseek_v3"})
    for (int tp : {1, 2, 4})
      for (auto boundary :
           {parallel::BoundaryContract::kFull, parallel::BoundaryContract::kShard}) {
        if (tp == 1 && boundary == parallel::BoundaryContract::kShard) continue;
        parallel::ParallelOptions o;
        o.tp = tp;
        o.pp = 2;
        o.sp = tp > 1;
        o.boundary = boundary;
        const std::string dir = family_model(family);
        const auto plan = parallel::make_plan(model::load_config(dir + "/config.json"), o);
        std::mutex mutex;
        std::vector<std::string> failures;
        runtime::run_ranks(runtime::Backend::kLocal, tp, 2, std::chrono::seconds(60),
                           [&](comm::Communicator& comm) {
                             auto m = load_rank_f32(dir, o, comm);
                             cache::BlockManager blocks(10, 4);
                             cache::PagedCache cache(m->cache_shape(10, 4));
                             for (int64_t n = 1; n <= 40; ++n) {
                               const int64_t want = parallel::pp_intermediate_token_count(plan, n);
                               std::vector<int32_t> tokens(static_cast<size_t>(n), 7);
                               cache::BlockTable table;
                               blocks.reserve(table, n);
                               m->forward({model::SequenceChunk{tokens, 0, &table, false}}, cache);
                               blocks.release(table);
                               const int64_t moved = m->is_first_stage() ? m->last_rows_sent()
                                                                         : m->last_rows_received();
                               m->profile_run(n);
                               const int64_t profiled = m->is_first_stage()
                                                            ? m->last_rows_sent()
                                                            : m->last_rows_received();
                               if (moved != want || profiled != want) {
                                 std::lock_guard lock(mutex);
                                 failures.push_back(fmt::format(
                                     "{} tp {} {} n {} rank {}: contract {} moved {} profiled {}",
                                     family, tp, parallel::contract_name(boundary), n,
                                     comm.topology().rank, want, moved, profiled));
                               }
                             }
                           });
        for (const auto& f : failures) ADD_FAILURE() << f;
      }
}

}  // namespace
}  // namespace handoff::testing
