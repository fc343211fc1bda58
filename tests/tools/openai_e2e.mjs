// End-to-end check of `handoff serve` with the official openai client:
//   node openai_e2e.mjs URL   (URL like http://127.0.0.1:8000)
// completion, chat, streaming chat with usage, 32 concurrent greedy streams equal to their
// single-request outputs, bad parameters answered with OpenAI error objects, models.retrieve,
// context overflow as 400 context_length_exceeded, X-Request-Id and system_fingerprint, n > 1
// choices, batch prompts, a shared system prompt found in the prefix cache (counted on /metrics).
// HANDOFF_E2E_RECORD=FILE writes the greedy texts to FILE; HANDOFF_E2E_EXPECT=FILE requires
// them to equal FILE's (one layout's server against another's, e.g. MPI ranks vs threads).
import OpenAI from "openai";
import assert from "node:assert/strict";
import fs from "node:fs";

const url = process.argv[2];
if (!url) throw new Error("usage: node openai_e2e.mjs URL");
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: process.env.HANDOFF_API_KEY ?? "none", maxRetries: 0 });

const models = await client.models.list();
const model = models.data[0].id;
console.log(`model: ${model}`);

const completion = await client.completions.create({ model, prompt: "The capital of France is", max_tokens: 8, temperature: 0 });
assert.equal(completion.object, "text_completion");
assert.equal(completion.usage.completion_tokens, 8);
assert.equal(completion.choices[0].finish_reason, "length");
console.log(`completion: ${JSON.stringify(completion.choices[0].text)}`);

// A stop string taken from the middle of the greedy text ends the same request right before it.
{
  const text = completion.choices[0].text;
  const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 3);
  const stopped = await client.completions.create({ model, prompt: "The capital of France is", max_tokens: 8, temperature: 0, stop: [stop] });
  assert.equal(stopped.choices[0].finish_reason, "stop");
  assert.equal(stopped.choices[0].text, text.slice(0, text.indexOf(stop)));
  console.log("stop string: ok");
}

const chat = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 8, temperature: 0 });
assert.equal(chat.choices[0].message.role, "assistant");
assert.equal(chat.usage.completion_tokens, 8);
console.log(`chat: ${JSON.stringify(chat.choices[0].message.content)}`);

async function streamChat(content, maxTokens) {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content }], max_tokens: maxTokens, temperature: 0,
    stream: true, stream_options: { include_usage: true },
  });
  let text = "", usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, usage, finish };
}

const streamed = await streamChat("Hello!", 8);
assert.equal(streamed.text, chat.choices[0].message.content, "streamed chat == plain chat");
assert.ok(streamed.usage, "include_usage sends a usage chunk");
assert.equal(streamed.usage.completion_tokens, 8);
assert.equal(streamed.finish, "length");
console.log("streaming chat with usage: ok");

// 32 concurrent greedy streams: each must equal the same request run alone.
const prompts = Array.from({ length: 32 }, (_, i) => `Request number ${i}: tell me about ${["cats", "the sea", "numbers", "Paris"][i % 4]}.`);
const single = [];
for (const p of prompts.slice(0, 8)) single.push(await streamChat(p, 12));
const concurrent = await Promise.all(prompts.map((p) => streamChat(p, 12)));
for (let i = 0; i < concurrent.length; ++i) {
  assert.equal(concurrent[i].usage.completion_tokens, 12, `request ${i} completed`);
  if (i < single.length) assert.equal(concurrent[i].text, single[i].text, `request ${i}: batched == alone`);
}
// The rest alone, after the batch.
for (let i = single.length; i < prompts.length; ++i) {
  const alone = await streamChat(prompts[i], 12);
  assert.equal(concurrent[i].text, alone.text, `request ${i}: batched == alone`);
}
console.log("32 concurrent streams == single requests: ok");

// n = 2: both choices (indices 0 and 1) share the prompt; at temperature 0 both are the greedy text.
const two = await client.completions.create({ model, prompt: "The capital of France is", max_tokens: 8, temperature: 0, n: 2 });
assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
for (const c of two.choices) assert.equal(c.text, completion.choices[0].text, `choice ${c.index} is greedy`);
assert.equal(two.usage.prompt_tokens, completion.usage.prompt_tokens, "the prompt counts once");
assert.equal(two.usage.completion_tokens, 16);
// Sampled, streamed chat with n = 2: every chunk names its choice; each choice finishes.
{
  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12, temperature: 1, seed: 7, n: 2,
    stream: true, stream_options: { include_usage: true },
  });
  const text = ["", ""], finish = [null, null], roles = [0, 0];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      assert.ok(c.index === 0 || c.index === 1, `choice index ${c.index}`);
      if (c.delta?.role) roles[c.index]++;
      text[c.index] += c.delta?.content ?? "";
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  assert.deepEqual(roles, [1, 1], "one role delta per choice");
  assert.deepEqual(finish, ["length", "length"]);
  assert.equal(usage.completion_tokens, 24);
  const whole = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12, temperature: 1, seed: 7, n: 2 });
  assert.deepEqual(whole.choices.map((c) => c.message.content), text, "streamed n = 2 == whole n = 2 (same seed)");
  console.log("n = 2 (plain, streamed chat): ok");
}

// A batch of prompts on /v1/completions: choice index = prompt index * n + choice.
const batchPrompts = ["The capital of France is", "Hello there", "Request number 3: tell me about the sea."];
const batch = await client.completions.create({ model, prompt: batchPrompts, max_tokens: 6, temperature: 0, n: 2 });
assert.deepEqual(batch.choices.map((c) => c.index), [0, 1, 2, 3, 4, 5]);
const batchAlone = [];
let batchPromptTokens = 0;
for (const p of batchPrompts) {
  const one = await client.completions.create({ model, prompt: p, max_tokens: 6, temperature: 0 });
  batchAlone.push(one.choices[0].text);
  batchPromptTokens += one.usage.prompt_tokens;
}
for (const c of batch.choices) assert.equal(c.text, batchAlone[Math.floor(c.index / 2)], `batch choice ${c.index}`);
assert.equal(batch.usage.prompt_tokens, batchPromptTokens);
assert.equal(batch.usage.completion_tokens, 36);
{
  const stream = await client.completions.create({ model, prompt: batchPrompts, max_tokens: 6, temperature: 0, stream: true });
  const text = ["", "", ""];
  for await (const chunk of stream) for (const c of chunk.choices) text[c.index] += c.text;
  assert.deepEqual(text, batchAlone, "streamed batch == each prompt alone");
}
console.log("batch prompts (plain, streamed, n = 2): ok");

// A long shared system prompt: the second request finds it in the prefix cache and computes
// only the rest (handoff_prompt_tokens_total counts computed prompt tokens).
async function metric(name) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m"));
  assert.ok(m, `/metrics has ${name}`);
  return Number(m[1]);
}
const prefixCaching = !(process.env.HANDOFF_E2E_SERVE_FLAGS ?? "").includes("--no-prefix-caching");
const system = Array.from({ length: 80 }, (_, i) => `Rule ${i}: answer briefly and politely.`).join(" ");
const shared = [];
for (const question of ["What is the capital of France?", "Name a large ocean."]) {
  const before = { computed: await metric("handoff_prompt_tokens_total"), hits: await metric("handoff_prefix_cache_hits_total") };
  const r = await client.chat.completions.create({ model, messages: [{ role: "system", content: system }, { role: "user", content: question }], max_tokens: 6, temperature: 0 });
  const computed = (await metric("handoff_prompt_tokens_total")) - before.computed;
  const hits = (await metric("handoff_prefix_cache_hits_total")) - before.hits;
  assert.ok(r.usage.prompt_tokens > 600, `a long system prompt (${r.usage.prompt_tokens} tokens)`);
  assert.equal(computed + hits, r.usage.prompt_tokens, "every prompt token computed or found cached");
  if (shared.length === 1 && prefixCaching) {
    assert.ok(hits >= r.usage.prompt_tokens - 40, `the system prompt came from the cache (${hits} of ${r.usage.prompt_tokens})`);
    console.log(`shared system prompt: ${hits} of ${r.usage.prompt_tokens} prompt tokens from the prefix cache, ${computed} computed`);
  } else if (!prefixCaching) {
    assert.equal(hits, 0);
  }
  shared.push(r.choices[0].message.content);
}

const texts = {
  completion: completion.choices[0].text, chat: chat.choices[0].message.content, streams: concurrent.map((c) => c.text),
  n2: two.choices.map((c) => c.text), batch: batch.choices.map((c) => c.text), shared,
};
if (process.env.HANDOFF_E2E_RECORD) fs.writeFileSync(process.env.HANDOFF_E2E_RECORD, JSON.stringify(texts, null, 1));
if (process.env.HANDOFF_E2E_EXPECT) {
  assert.deepEqual(texts, JSON.parse(fs.readFileSync(process.env.HANDOFF_E2E_EXPECT, "utf8")), "greedy texts equal the recorded server's");
  console.log(`greedy texts == ${process.env.HANDOFF_E2E_EXPECT}: ok`);
}

async function expectError(status, body, param) {
  try {
    await client.chat.completions.create({ model, messages: [{ role: "user", content: "x" }], max_tokens: 2, ...body });
  } catch (e) {
    assert.equal(e.status, status, `${JSON.stringify(body)} -> ${e.status}`);
    assert.ok(e.error?.message, "an error object with a message");
    if (param) assert.equal(e.error.param, param);
    return;
  }
  assert.fail(`${JSON.stringify(body)} was accepted`);
}
await expectError(400, { temperature: 3 }, "temperature");
await expectError(400, { top_p: 0 }, "top_p");
await expectError(400, { n: 0 }, "n");
await expectError(400, { n: 1000 }, "n");
await expectError(400, { n: 100 });  // more than the server's --max-num-seqs (64)
await expectError(400, { max_tokens: 0 }, "max_tokens");
await expectError(400, { messages: [] }, "messages");
await expectError(404, { model: "no-such-model" }, "model");
await expectError(400, { max_tokens: 1 << 20 });
console.log("bad parameters -> OpenAI error objects: ok");

// The rest of the surface a client library relies on.
{
  const card = await client.models.retrieve(model);
  assert.equal(card.id, model);
  assert.equal(card.object, "model");
  try {
    await client.models.retrieve("no-such-model");
    assert.fail("models.retrieve of an unknown id succeeded");
  } catch (e) {
    assert.equal(e.status, 404);
    assert.equal(e.code, "model_not_found");
  }
  console.log("models.retrieve: ok");
  // prompt + max_tokens over the context: 400 context_length_exceeded (413 is only for bodies).
  try {
    await client.completions.create({ model, prompt: "The capital of France is", max_tokens: 1 << 20 });
    assert.fail("a request over the context was accepted");
  } catch (e) {
    assert.equal(e.status, 400);
    assert.equal(e.code, "context_length_exceeded");
    assert.equal(e.param, "prompt");
  }
  console.log("context overflow -> 400 context_length_exceeded: ok");
  const { data, response } = await client.chat.completions
    .create({ model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 2, temperature: 0 },
      { headers: { "X-Request-Id": "e2e-trace-1" } })
    .withResponse();
  assert.equal(response.headers.get("x-request-id"), "e2e-trace-1");
  assert.equal(data.id, "chatcmpl-e2e-trace-1");
  assert.match(data.system_fingerprint, /^fp_handoff-/);
  // Without a client id each answer gets its own random one.
  const other = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 2, temperature: 0 }).withResponse();
  assert.match(other.data.id, /^chatcmpl-[0-9a-f]{32}$/);
  assert.equal(other.response.headers.get("x-request-id"), other.data.id.slice("chatcmpl-".length));
  console.log("X-Request-Id and system_fingerprint: ok");
}
console.log("openai e2e passed");
