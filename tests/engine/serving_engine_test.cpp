// The serving engine: scheduler budget, chunked prefill, max_num_seqs, preemption by
// recompute, sampling parameters, and batch invariance at f32 (a batch gives the same greedy
// tokens as its requests run one at a time).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "handoff/engine/engine.h"
#include "handoff/engine/logprobs.h"
#include "handoff/engine/scheduler.h"
#include "handoff/model/model.h"
#include "handoff/ops/linear.h"
#include "handoff/runtime/local_executor.h"

namespace handoff::engine {
namespace {

const std::string kModel = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_tiny_sparse";

std::unique_ptr<Sequence> make_seq(uint64_t id, int64_t prompt_len) {
  Request r;
  r.prompt.assign(static_cast<size_t>(prompt_len), 7);
  return std::make_unique<Sequence>(id, std::move(r), std::make_shared<RequestStream>(id));
}

TEST(SchedulerTest, BudgetChunksPrefillAndCapsSequences) {
  cache::BlockManager blocks(64, 4);
  Scheduler s({/*max_num_batched_tokens=*/10, /*max_num_seqs=*/2}, blocks);
  s.add(make_seq(1, 25));
  s.add(make_seq(2, 3));
  s.add(make_seq(3, 3));
  auto step = s.schedule();
  ASSERT_EQ(step.size(), 1u);  // the long prompt takes the whole budget
  EXPECT_EQ(step[0].num_tokens, 10);
  EXPECT_FALSE(step[0].samples);
  step[0].seq->num_computed += 10;
  step = s.schedule();
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].start, 10);
  step[0].seq->num_computed += 10;
  step = s.schedule();  // 5 left of the prompt, then sequence 2 joins; 3 waits (max_num_seqs)
  ASSERT_EQ(step.size(), 2u);
  EXPECT_EQ(step[0].num_tokens, 5);
  EXPECT_TRUE(step[0].samples);
  EXPECT_EQ(step[1].seq->id, 2u);
  EXPECT_EQ(s.num_running(), 2);
  EXPECT_EQ(s.num_waiting(), 1);
}

TEST(SchedulerTest, PreemptsTheYoungestWhenBlocksRunOut) {
  cache::BlockManager blocks(4, 4);  // 16 tokens in all
  Scheduler s({64, 8}, blocks);
  s.add(make_seq(1, 8));
  s.add(make_seq(2, 8));
  auto step = s.schedule();
  ASSERT_EQ(step.size(), 2u);
  for (auto& c : step) {
    c.seq->num_computed += c.num_tokens;
    c.seq->tokens.push_back(1);  // a sampled token: both need a 9th slot, one block more each
  }
  step = s.schedule();
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].seq->id, 1u);
  EXPECT_EQ(s.num_preemptions(), 1);
  Sequence* young = s.find(2);
  ASSERT_NE(young, nullptr);
  EXPECT_EQ(young->num_computed, 0);  // recompute: prompt + generated are fed again
  EXPECT_EQ(young->pending(), 9);
}

struct Run {
  std::vector<std::vector<int32_t>> tokens;
};

std::unique_ptr<Engine> make_engine(const EngineOptions& o) {
  model::LoadOptions load;
  load.dtype = tensor::DType::kF32;
  load.batch_invariant = true;
  auto model = model::Model::load(kModel, load);
  auto exec = std::make_unique<runtime::SingleRankExecutor>(std::make_unique<runtime::Worker>(
      std::move(model),
      runtime::WorkerOptions{o.num_blocks, o.block_size, o.scheduler.max_num_batched_tokens}));
  return std::make_unique<Engine>(o, std::move(exec), nullptr);
}

std::unique_ptr<Engine> make_engine(int64_t num_blocks, int64_t budget = 512,
                                    bool prefix_caching = true) {
  EngineOptions o;
  o.block_size = 4;
  o.num_blocks = num_blocks;
  o.max_model_len = std::min<int64_t>(64, num_blocks * o.block_size);
  o.scheduler.max_num_batched_tokens = budget;
  o.prefix_caching = prefix_caching;
  return make_engine(o);
}

std::vector<int32_t> prompt(int i) {
  std::vector<int32_t> p;
  for (int j = 0; j < 5 + i % 7; ++j) p.push_back((17 * i + 5 * j + 3) % 256);
  return p;
}

Request greedy(int i, int64_t max_tokens = 10) {
  Request r;
  r.prompt = prompt(i);
  r.max_tokens = max_tokens;
  return r;
}

TEST(ServingEngineTest, BatchGivesTheGreedyTokensOfSingleRequestsAtF32) {
  constexpr int kRequests = 12;
  std::vector<std::vector<int32_t>> alone, batched;
  {
    auto engine = make_engine(256);
    for (int i = 0; i < kRequests; ++i) {
      auto s = engine->submit(greedy(i));
      engine->run_until_idle();
      alone.push_back(s->wait_all().tokens);
    }
  }
  {
    auto engine = make_engine(256, /*budget=*/24);  // chunked prefill and mixed steps too
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < kRequests; ++i) streams.push_back(engine->submit(greedy(i)));
    engine->run_until_idle();
    for (auto& s : streams) batched.push_back(s->wait_all().tokens);
  }
  for (int i = 0; i < kRequests; ++i) EXPECT_EQ(batched[i], alone[i]) << "request " << i;
}

TEST(ServingEngineTest, PreemptionByRecomputeKeepsGreedyTokens) {
  std::vector<std::vector<int32_t>> roomy, tight;
  for (int64_t blocks : {256, 12}) {
    auto engine = make_engine(blocks);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < 6; ++i) streams.push_back(engine->submit(greedy(i, 16)));
    engine->run_until_idle();
    auto& out = blocks == 256 ? roomy : tight;
    for (auto& s : streams) out.push_back(s->wait_all().tokens);
    if (blocks == 12) {
      EXPECT_GT(engine->stats().preemptions, 0u);
    }
  }
  EXPECT_EQ(tight, roomy);
}

TEST(ServingEngineTest, StopTokenIdsAndMaxTokensAndCancel) {
  auto engine = make_engine(256);
  auto first = engine->submit(greedy(1, 10));
  engine->run_until_idle();
  const auto all = first->wait_all();
  ASSERT_EQ(all.tokens.size(), 10u);
  EXPECT_EQ(*all.finish_reason, "length");
  Request r = greedy(1, 10);
  r.stop_token_ids = {all.tokens[3]};
  auto stopped = engine->submit(r);
  engine->run_until_idle();
  const auto s = stopped->wait_all();
  EXPECT_EQ(*s.finish_reason, "stop");
  EXPECT_LE(s.tokens.size(), 4u);
  auto cancelled = engine->submit(greedy(2, 10));
  engine->cancel(cancelled->id());
  engine->run_until_idle();
  EXPECT_EQ(*cancelled->wait_all().finish_reason, "abort");
}

// A consumer that is woken only at the end still gets every event, in order, each timed by the
// engine: token events by their sampling (the first one's time is the request's ttft), the
// final one by its finish (e2e).
TEST(ServingEngineTest, EventsCarryTheEngineTimeAndWakeOnlyAtEndLosesNone) {
  auto engine = make_engine(256);
  auto stream = engine->submit(greedy(3, 6));
  stream->wake_only_at_end();
  engine->run_until_idle();
  std::vector<RequestEvent> events;
  for (RequestEvent e; stream->pop(e, std::chrono::milliseconds(0));) events.push_back(e);
  ASSERT_EQ(events.size(), 6u);  // the last token comes with the finish
  double before = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    ASSERT_EQ(events[i].tokens.size(), 1u) << "event " << i;
    EXPECT_GT(events[i].at_s, 0.0) << "event " << i;
    EXPECT_GE(events[i].at_s, before) << "event " << i;
    before = events[i].at_s;
    EXPECT_EQ(events[i].finish_reason.has_value(), i + 1 == events.size()) << "event " << i;
  }
  EXPECT_EQ(events.front().at_s, events.back().ttft_s);
  EXPECT_EQ(events.back().at_s, events.back().e2e_s);
}

// Prompts that share leading blocks in several ways: the same system prompt, one prompt the
// prefix of another, a repeat, block-aligned and not.
std::vector<std::vector<int32_t>> shared_prefix_prompts() {
  std::vector<int32_t> system;
  for (int j = 0; j < 13; ++j) system.push_back((31 * j + 11) % 256);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p = system;
    for (int j = 0; j < 1 + i % 5; ++j) p.push_back((7 * i + 3 * j + 1) % 256);
    out.push_back(p);
  }
  out.push_back(out[2]);                                                    // a repeat
  out.push_back(std::vector<int32_t>(system.begin(), system.begin() + 8));  // block-aligned prefix
  out.push_back(std::vector<int32_t>(system.begin(), system.begin() + 9));
  return out;
}

std::vector<std::vector<int32_t>> run_prompts(Engine& engine,
                                              const std::vector<std::vector<int32_t>>& prompts,
                                              bool one_at_a_time) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.max_tokens = 6;
    streams.push_back(engine.submit(r));
    if (one_at_a_time) engine.run_until_idle();
  }
  engine.run_until_idle();
  for (auto& s : streams) out.push_back(s->wait_all().tokens);
  return out;
}

TEST(ServingEnginePrefixCache, SameGreedyTokensWithAndWithoutAtF32) {
  const auto prompts = shared_prefix_prompts();
  auto off = make_engine(256, 512, /*prefix_caching=*/false);
  const auto expected = run_prompts(*off, prompts, true);
  EXPECT_EQ(off->stats().prefix_cache_queries, 0u);
  // One at a time (every later prompt finds the earlier ones' blocks), then all at once in small
  // chunked steps, then under preemption in a cache too small for all of them.
  for (auto [blocks, budget, alone] :
       {std::tuple{256, 512, true}, std::tuple{256, 7, false}, std::tuple{14, 512, false}}) {
    SCOPED_TRACE(testing::Message() << blocks << " blocks, budget " << budget);
    auto on = make_engine(blocks, budget, true);
    EXPECT_EQ(run_prompts(*on, prompts, alone), expected);
    // A second round: all of it repeats, everything but the last token of each is cached.
    EXPECT_EQ(run_prompts(*on, prompts, alone), expected);
    const EngineStats s = on->stats();
    EXPECT_GT(s.prefix_cache_hits, 0u);
    EXPECT_LE(s.prefix_cache_hits, s.prefix_cache_queries);
    EXPECT_EQ(s.cache_blocks_used, 0);  // idle: cached blocks are not in use
    if (blocks == 14) {
      EXPECT_GT(s.preemptions, 0u);
    }
  }
}

TEST(ServingEnginePrefixCache, ASecondRequestWithTheSameSystemPromptComputesOnlyItsNewTokens) {
  EngineOptions o;
  o.block_size = 16;
  o.num_blocks = 256;
  o.max_model_len = 2048;
  o.scheduler.max_num_batched_tokens = 2048;
  auto engine = make_engine(o);
  std::vector<int32_t> system;
  for (int j = 0; j < 1000; ++j) system.push_back((37 * j + 5) % 250 + 2);
  auto with_question = [&](int q) {
    Request r;
    r.prompt = system;
    for (int j = 0; j < 16; ++j) r.prompt.push_back((q * 16 + j) % 250 + 2);
    r.max_tokens = 2;
    r.ignore_eos = true;
    return r;
  };
  engine->submit(with_question(1));
  engine->run_until_idle();
  const EngineStats first = engine->stats();
  EXPECT_EQ(first.prompt_tokens, 1016u);
  EXPECT_EQ(first.prefix_cache_queries, 1016u);
  EXPECT_EQ(first.prefix_cache_hits, 0u);
  auto second = engine->submit(with_question(2));
  engine->run_until_idle();
  EXPECT_EQ(second->wait_all().tokens.size(), 2u);
  const EngineStats s = engine->stats();
  // 62 full blocks of 16 (992 tokens) come from the cache; the system prompt's last 8 tokens
  // share their block with the question's 16, so 24 tokens are computed.
  EXPECT_EQ(s.prefix_cache_hits - first.prefix_cache_hits, 992u);
  EXPECT_EQ(s.prefix_cache_queries - first.prefix_cache_queries, 1016u);
  EXPECT_EQ(s.prompt_tokens - first.prompt_tokens, 24u);
}

TEST(ServingEngineChoices, NChoicesShareThePromptAndEachSamplesAsItsOwnSeedAlone) {
  // Temperature 1: the choices differ, so a choice writing into its sibling's prompt block
  // (no copy-on-write) would change the other's later tokens.
  auto engine = make_engine(256);
  Request r;
  r.prompt = prompt(3);
  r.prompt.push_back(42);  // 9 tokens: the last block (of 4) is partial, shared by the forks
  r.max_tokens = 10;
  r.sampling.temperature = 1.0f;
  r.seed = 1234;
  r.n = 3;
  auto stream = engine->submit(r);
  engine->run_until_idle();
  const std::vector<RequestEvent> choices = stream->wait_all_choices();
  ASSERT_EQ(choices.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(choices[k].index, k);
    EXPECT_EQ(choices[k].tokens.size(), 10u);
    EXPECT_EQ(*choices[k].finish_reason, "length");
  }
  EXPECT_NE(choices[0].tokens, choices[1].tokens);
  EXPECT_NE(choices[1].tokens, choices[2].tokens);
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.prompt_tokens, 9u);  // the prompt was computed once
  EXPECT_EQ(s.cache_blocks_used, 0);
  auto off = make_engine(256, 512, /*prefix_caching=*/false);
  for (int k = 0; k < 3; ++k) {
    Request alone = r;
    alone.n = 1;
    alone.seed = choice_seed(r.seed, k);
    auto a = off->submit(alone);
    off->run_until_idle();
    EXPECT_EQ(a->wait_all().tokens, choices[k].tokens) << "choice " << k;
  }
}

TEST(ServingEngineChoices, CancelAndMaxNumSeqsCoverEveryChoice) {
  auto engine = make_engine(256);
  Request r = greedy(2, 10);
  r.n = 2;
  auto cancelled = engine->submit(r);
  engine->cancel(cancelled->id());  // before the prompt ran: the forks never exist
  engine->run_until_idle();
  const auto all = cancelled->wait_all_choices();
  for (const auto& c : all) EXPECT_EQ(*c.finish_reason, "abort");
  EXPECT_EQ(engine->in_flight(), 0);
  auto running = engine->submit(r);
  engine->step();
  engine->step();  // forked by now
  engine->cancel(running->id());
  engine->run_until_idle();
  for (const auto& c : running->wait_all_choices()) EXPECT_EQ(*c.finish_reason, "abort");
  EXPECT_EQ(engine->in_flight(), 0);
  EXPECT_EQ(engine->stats().cache_blocks_used, 0);
  r.n = 65;  // more than max_num_seqs (64): they could never run side by side
  EXPECT_THROW(engine->submit(r), InputError);
}

TEST(SamplingTest, PenaltiesMinPAndLogprobs) {
  std::vector<float> logits = {2.0f, 1.0f, 0.5f, -1.0f};
  SamplingParams p;
  p.presence_penalty = 1.0f;
  p.frequency_penalty = 0.5f;
  PenaltyState st;
  st.output_counts[0] = 2;
  apply_penalties(logits.data(), 4, p, st);
  EXPECT_FLOAT_EQ(logits[0], 2.0f - 1.0f - 1.0f);
  SamplingParams rep;
  rep.repetition_penalty = 2.0f;
  PenaltyState seen;
  seen.seen = {false, true, false, true};
  std::vector<float> l2 = {1.0f, 1.0f, 1.0f, -1.0f};
  apply_penalties(l2.data(), 4, rep, seen);
  EXPECT_FLOAT_EQ(l2[1], 0.5f);
  EXPECT_FLOAT_EQ(l2[3], -2.0f);
  // min_p keeps only tokens within a factor of the best: here only token 0.
  std::vector<float> l3 = {10.0f, 0.0f, 0.0f, 0.0f};
  SamplingParams mp;
  mp.temperature = 1.0f;
  mp.min_p = 0.1f;
  Sampler sampler(5);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sampler.sample(l3.data(), 4, mp), 0);
  // Log-probabilities of every token sum to 1 in probability.
  const TokenLogprob lp = token_logprob(logits.data(), 4, 1, 4);
  double total = 0;
  for (const auto& t : lp.top) total += std::exp(static_cast<double>(t.logprob));
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_EQ(lp.top.size(), 4u);
  EXPECT_THROW(validate(SamplingParams{.min_p = 2.0f}), InputError);
}

}  // namespace
}  // namespace handoff::engine
