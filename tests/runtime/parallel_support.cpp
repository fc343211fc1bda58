#include "parallel_support.h"

#include <fmt/format.h>

#include <chrono>
#include <mutex>

#include "handoff/model/model.h"
#include "handoff/runtime/rank_launcher.h"

namespace handoff::testing {

std::vector<MatrixEntry> parallel_matrix() {
  std::vector<MatrixEntry> out;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 3})
      for (bool sp : {false, true}) {
        if (sp && tp == 1) continue;
        const bool knobs = sp && pp > 1;
        for (auto boundary :
             {parallel::BoundaryContract::kFull, parallel::BoundaryContract::kShard})
          for (auto policy : {parallel::SpPolicy::kKeep, parallel::SpPolicy::kGuard}) {
            if (!knobs && (boundary != parallel::BoundaryContract::kFull ||
                           policy != parallel::SpPolicy::kKeep))
              continue;
            parallel::ParallelOptions o;
            o.tp = tp;
            o.pp = pp;
            o.sp = sp;
            o.boundary = boundary;
            o.policy = policy;
            std::string name = fmt::format("tp{}_pp{}_sp{}", tp, pp, sp ? "on" : "off");
            if (knobs)
              name += fmt::format("_{}_{}", parallel::contract_name(boundary),
                                  parallel::policy_name(policy));
            out.push_back({o, name});
          }
      }
  return out;
}

std::unique_ptr<model::Model> load_rank_f32(const std::string& model_dir,
                                            const parallel::ParallelOptions& options,
                                            comm::Communicator& comm, int64_t per_head_min_tokens) {
  model::LoadOptions load;
  load.dtype = tensor::DType::kF32;
  load.per_head_prefill_min_tokens = per_head_min_tokens;
  load.parallel = options;
  load.comm = &comm;
  return model::Model::load(model_dir, load);
}

engine::GenerationResult run_parallel_teacher_forced(const std::string& model_dir,
                                                     const parallel::ParallelOptions& options,
                                                     const std::vector<int32_t>& prompt,
                                                     const std::vector<int32_t>& forced,
                                                     int64_t per_head_min_tokens) {
  engine::GenerationResult root_result;
  std::mutex mutex;
  const int root = (options.pp - 1) * options.tp;
  runtime::run_ranks(runtime::Backend::kLocal, options.tp, options.pp, std::chrono::seconds(60),
                     [&](comm::Communicator& comm) {
                       auto model = load_rank_f32(model_dir, options, comm, per_head_min_tokens);
                       engine::GenerationOptions go;
                       go.max_new_tokens = static_cast<int64_t>(forced.size());
                       go.record = true;
                       engine::Generator generator(
                           *model, static_cast<int64_t>(prompt.size() + forced.size()), 4);
                       engine::Sampler sampler(0);
                       auto r = generator.run(prompt, go, sampler, forced);
                       if (comm.topology().rank == root) {
                         std::lock_guard lock(mutex);
                         root_result = std::move(r);
                       }
                     });
  return root_result;
}

StepMeasurement measure_prefill_step(const std::string& model_dir,
                                     const parallel::ParallelOptions& options,
                                     const std::vector<int32_t>& prompt) {
  const int ranks = options.tp * options.pp;
  StepMeasurement m;
  m.counts.resize(static_cast<size_t>(ranks));
  m.rows_sent.assign(static_cast<size_t>(ranks), 0);
  m.rows_received.assign(static_cast<size_t>(ranks), 0);
  std::mutex mutex;
  runtime::run_ranks(runtime::Backend::kLocal, options.tp, options.pp, std::chrono::seconds(60),
                     [&](comm::Communicator& comm) {
                       auto model = load_rank_f32(model_dir, options, comm);
                       const auto n = static_cast<int64_t>(prompt.size());
                       cache::BlockManager blocks((n + 3) / 4, 4);
                       cache::PagedCache cache(model->cache_shape((n + 3) / 4, 4));
                       cache::BlockTable table;
                       blocks.reserve(table, n);
                       comm.reset_counts();
                       model->forward({model::SequenceChunk{prompt, 0, &table, false}}, cache);
                       const int64_t row_bytes = 2 * model->config().hidden_size * 4;
                       std::lock_guard lock(mutex);
                       const auto rank = static_cast<size_t>(comm.topology().rank);
                       m.counts[rank] = comm.counts();
                       for (const auto& [key, stats] : comm.counts()) {
                         if (std::get<1>(key) == comm::Op::kSend)
                           m.rows_sent[rank] += stats.bytes / row_bytes;
                         if (std::get<1>(key) == comm::Op::kRecv)
                           m.rows_received[rank] += stats.bytes / row_bytes;
                       }
                     });
  return m;
}

}  // namespace handoff::testing
