// The decode MoE's MLPs shared out block by block give the numbers of one MLP after another.
#include "handoff/model/cooperative_mlps.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "handoff/error.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/model_maker.h"
#include "handoff/model/weight_loader.h"
#include "handoff/tensor/thread_pool.h"
#include "test_util.h"

namespace handoff::model {
namespace {

using tensor::DType;

TEST(CooperativeMlps, EqualMlpsRunOneAfterAnotherBitForBit) {
  testing::TempDir dir;
  MakeModelOptions o;
  o.config = preset_config("tiny", Family::kDeepseekV32);
  // gate_up of 3 blocks (claims of two straddle gate_up and down), a down of 3 blocks (the last
  // partial), the shared experts twice as wide: unequal shares.
  o.config.hidden_size = 130;
  o.config.moe_intermediate_size = 96;
  o.config.n_shared_experts = 2;
  o.dtype = DType::kBF16;
  o.out_dir = dir.file("m");
  o.seed = 3;
  make_model(o);
  const ModelConfig& c = o.config;
  const Checkpoint ck = Checkpoint::open(o.out_dir, load_config(o.out_dir + "/config.json"));
  struct Case {
    DType dtype;
    bool row_independent;  // the serving engine's f32 weights: on the small-M kernels at any M
  };
  for (const Case& k :
       {Case{DType::kBF16, false}, Case{DType::kF32, false}, Case{DType::kF32, true}}) {
    SCOPED_TRACE(std::string(tensor::dtype_name(k.dtype)) + (k.row_independent ? " rows" : ""));
    WeightLoaderOptions options;
    options.row_independent = k.row_independent;
    const WeightLoader weights(ck, k.dtype, options);
    std::vector<Mlp> mlps;
    mlps.emplace_back(weights, "model.layers.1.mlp.shared_experts.", c.hidden_size,
                      c.moe_intermediate_size * c.n_shared_experts);
    for (int e = 0; e < 5; ++e)
      mlps.emplace_back(weights, fmt::format("model.layers.1.mlp.experts.{}.", e), c.hidden_size,
                        c.moe_intermediate_size);
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<std::vector<float>> xs, want, got, scratch;
    for (size_t i = 0; i < mlps.size(); ++i) {
      const int64_t rows = static_cast<int64_t>(k.row_independent ? 17 + i : 1 + i % 3);
      xs.emplace_back(static_cast<size_t>(rows * c.hidden_size));
      for (float& v : xs.back()) v = dist(rng);
      want.emplace_back(xs.back().size());
      got.emplace_back(xs.back().size());
      scratch.emplace_back(static_cast<size_t>(rows * 3 * mlps[i].intermediate()));
      mlps[i].forward(xs[i].data(), rows, want[i].data(), scratch[i].data());
    }
    CooperativeMlps team(mlps.size());
    auto add = [&](size_t i) {
      std::fill(got[i].begin(), got[i].end(), -7.0f);
      const auto rows = static_cast<int64_t>(xs[i].size()) / c.hidden_size;
      team.add(mlps[i], xs[i].data(), rows, got[i].data(), scratch[i].data());
    };
    // Late: the shared expert added before the region, the routed ones by add_more inside it
    // (as the decode MoE does once its router has run).
    for (const bool late : {false, true}) {
      for (const int threads : {1, 2, 3}) {
        for (int step = 0; step < 3; ++step) {  // the jobs are reused step after step
          std::thread([&] {
            tensor::set_num_threads(threads);
            team.clear();
            if (late) {
              add(0);
              team.run([&] {
                for (size_t i = 1; i < mlps.size(); ++i) add(i);
              });
            } else {
              for (size_t i = 0; i < mlps.size(); ++i) add(i);
              team.run();
            }
          }).join();
          for (size_t i = 0; i < mlps.size(); ++i)
            EXPECT_EQ(got[i], want[i])
                << "MLP " << i << ", " << threads << " threads" << (late ? ", late" : "");
        }
      }
    }
    // add_more failing mid-way: the error reaches the caller, nobody waits for the MLPs it
    // never shared out, and the next step runs as usual.
    std::thread([&] {
      tensor::set_num_threads(2);
      team.clear();
      add(0);
      EXPECT_THROW(team.run([&] {
        add(1);
        fail("router failed");
      }),
                   Error);
      EXPECT_EQ(got[0], want[0]);  // the early MLP was finished
      team.clear();
      add(0);
      team.run([&] { add(2); });
    }).join();
    EXPECT_EQ(got[0], want[0]);
    EXPECT_EQ(got[2], want[2]);
    team.clear();
    team.run();  // nothing added: nothing to do
    for (size_t i = 0; i < mlps.size(); ++i)
      team.add(mlps[i], xs[i].data(), 1, got[i].data(), scratch[i].data());
    EXPECT_THROW(team.add(mlps[0], xs[0].data(), 1, got[0].data(), scratch[0].data()), Error);
  }
}

}  // namespace
}  // namespace handoff::model
