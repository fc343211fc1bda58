// What the engine reports and refuses at run time, with a scripted executor (no model): a
// non-finite logits row ends only its own request, with an error event and no token; the
// /metrics gauges follow every change, so an idle engine reads 0 running, 0 waiting and 0
// used cache blocks, whether its requests finished, were cancelled or failed.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <thread>

#include "handoff/engine/engine.h"

namespace handoff::engine {
namespace {

using namespace std::chrono_literals;

const std::string kConfig =
    std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_tiny_sparse/config.json";
constexpr int32_t kPoison = 13;  // a chunk holding this token gets a NaN in its logits row
constexpr int32_t kNext = 7;     // every other row's argmax

// Logits by script: token kNext wins, except in rows of chunks that contain kPoison.
class ScriptedExecutor : public runtime::Executor {
 public:
  explicit ScriptedExecutor(std::chrono::milliseconds step_time = 0ms)
      : config_(model::load_config(kConfig)), step_time_(step_time) {}
  const model::ModelConfig& config() const override { return config_; }
  tensor::Tensor step(const runtime::Step& step) override {
    const std::vector<model::SequenceChunk>& chunks = step.chunks;
    std::this_thread::sleep_for(step_time_);
    const int64_t vocab = config_.vocab_size;
    auto logits =
        tensor::Tensor::zeros({static_cast<int64_t>(chunks.size()), vocab}, tensor::DType::kF32);
    for (size_t i = 0; i < chunks.size(); ++i) {
      float* row = logits.data<float>() + static_cast<int64_t>(i) * vocab;
      row[kNext] = 5.0f;
      for (int32_t t : chunks[i].tokens)
        if (t == kPoison) row[100] = std::numeric_limits<float>::quiet_NaN();
    }
    return logits;
  }

 private:
  model::ModelConfig config_;
  std::chrono::milliseconds step_time_;
};

std::unique_ptr<Engine> make_engine(std::chrono::milliseconds step_time = 0ms) {
  EngineOptions o;
  o.block_size = 4;
  o.num_blocks = 64;
  o.max_model_len = 128;
  return std::make_unique<Engine>(o, std::make_unique<ScriptedExecutor>(step_time), nullptr);
}

Request request(std::vector<int32_t> prompt, int64_t max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

// Polls the gauges until the engine reads idle (the step thread updates them after the last
// event was delivered); false when it does not within two seconds.
bool reads_idle(const Engine& engine) {
  for (int i = 0; i < 200; ++i) {
    const EngineStats s = engine.stats();
    if (s.running == 0 && s.waiting == 0 && s.cache_blocks_used == 0) return true;
    std::this_thread::sleep_for(10ms);
  }
  const EngineStats s = engine.stats();
  ADD_FAILURE() << "gauges of an idle engine: running " << s.running << ", waiting " << s.waiting
                << ", cache blocks used " << s.cache_blocks_used;
  return false;
}

TEST(EngineHealthTest, NonFiniteLogitsEndOnlyThatRequestWithAnError) {
  auto engine = make_engine();
  auto healthy = engine->submit(request({1, 2, 3}, 4));
  auto poisoned = engine->submit(request({1, kPoison, 3}, 4));
  engine->run_until_idle();
  const RequestEvent bad = poisoned->wait_all();
  EXPECT_TRUE(bad.tokens.empty()) << "a token was sampled from NaN logits";
  EXPECT_EQ(bad.finish_reason.value_or(""), "abort");
  EXPECT_NE(bad.error.find("non-finite logit (nan) for token id 100"), std::string::npos)
      << bad.error;
  const RequestEvent good = healthy->wait_all();
  EXPECT_TRUE(good.error.empty()) << good.error;
  EXPECT_EQ(good.tokens, (std::vector<int32_t>{kNext, kNext, kNext, kNext}));
  EXPECT_EQ(good.finish_reason.value_or(""), "length");
}

TEST(EngineHealthTest, GaugesReadZeroOnceTheEngineIsIdle) {
  auto engine = make_engine();
  engine->start();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(engine->submit(request({1, 2, 3, 4, 5}, 6)));
  streams.push_back(engine->submit(request({kPoison, 2}, 6)));  // fails at its first token
  for (auto& s : streams) s->wait_all();
  EXPECT_TRUE(reads_idle(*engine));
  EXPECT_EQ(engine->stats().finished["length"], 3u);
  engine->stop();
}

TEST(EngineHealthTest, GaugesFollowARunningRequestAndItsCancel) {
  auto engine = make_engine(2ms);
  engine->start();
  auto stream = engine->submit(request({1, 2, 3, 4, 5, 6}, 100));
  RequestEvent first;
  ASSERT_TRUE(stream->pop(first, 5s));
  ASSERT_FALSE(first.finish_reason.has_value());
  EngineStats busy = engine->stats();
  EXPECT_EQ(busy.running, 1);
  EXPECT_GE(busy.cache_blocks_used, 2);  // 7 tokens in blocks of 4
  engine->cancel(stream->id());
  const RequestEvent rest = stream->wait_all();
  EXPECT_EQ(rest.finish_reason.value_or(""), "abort");
  EXPECT_TRUE(reads_idle(*engine));
  engine->stop();
}

}  // namespace
}  // namespace handoff::engine
