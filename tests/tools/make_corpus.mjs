// Writes tests/data/tokenizer/corpus.jsonl: a deterministic mix of texts that exercise the
// tokenizer's pre-tokenizer regexes, added tokens and BPE. Run once with `node make_corpus.mjs`;
// the output is committed so the comparison does not depend on this script's randomness.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// mulberry32: a tiny seeded PRNG so reruns produce the same corpus.
let seed = 20240607;
function rand() {
  seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const int = (n) => Math.floor(rand() * n);

const english = [
  "The quick brown fox jumps over the lazy dog.", "Hello, world!", "I can't believe it's not butter.",
  "She said: \"we'll see\" and left.", "Isn't it ironic?", "They've been here since 1999.",
  "Mr. O'Neil's dog barked at 3:45 p.m.", "e.g. the U.S.A. and the U.K.", "well-known, state-of-the-art",
  "ALL CAPS SENTENCE HERE", "camelCaseIdentifier and snake_case_name", "Email me at someone@example.com",
  "Visit https://example.org/path?query=1&x=y#frag", "C'est la vie, naïve café, résumé",
  "Ünïcödé façade déjà vu", "Straße, Größe, Fußball", "Привет, как дела?", "Γειά σου Κόσμε",
  "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Xin chào thế giới",
];
const chinese = [
  "你好，世界！", "我爱自然语言处理。", "今天天气很好，我们去公园散步吧。", "机器学习是人工智能的一个分支。",
  "这是一个测试句子，包含标点符号：逗号、句号。", "深度求索（DeepSeek）发布了新模型", "中华人民共和国",
  "《红楼梦》是中国古典小说", "北京时间2024年6月7日", "繁體中文測試：臺灣、香港",
];
const japanese = [
  "こんにちは世界", "日本語のテキストです。", "カタカナとひらがなを混ぜる", "東京タワーに行きました！",
  "ｶﾀｶﾅ半角", "吾輩は猫である。名前はまだ無い。", "ラーメンを食べたい",
];
const korean = ["안녕하세요 세계", "한국어 문장입니다.", "서울특별시 강남구", "감사합니다!"];
const code = [
  "def foo(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
  "const f = (a, b) => a + b;", "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); }",
  "SELECT * FROM users WHERE id = 42;", "<div class=\"x\">text</div>", "{\"key\": [1, 2, 3], \"b\": null}",
  "if x != y and not z:\n    pass", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
  "$ ls -la | grep '.txt' > out.log 2>&1", "x = a**2 + b**2 // 3 % 7", "// comment\n/* block */",
  "   indented\n      more\n\tand tab", "std::vector<std::string> v{\"a\", \"b\"};",
];
const emoji = [
  "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏿‍💻", "🇯🇵🇺🇸", "❤️", "🤷‍♂️", "🧑🏻‍🤝‍🧑🏿", "1️⃣", "✋🏼", "🐱‍👤",
];
const specials = [
  "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>",
  "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜fim▁hole｜>",
  "<｜▁pad▁｜>", "<｜place▁holder▁no▁1｜>", "<｜begin▁of▁sentence", "｜>",
];
const punctuation = ["...", "!!!", "?!", "—", "–", "…", "«»", "“quoted”", "‘single’", "()", "[]{}", "@#$%^&*", "、。！？", "～", "·"];
const whitespace = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t", "        ", "\n\n\n", " \t\n"];
const longWords = ["Pneumonoultramicroscopicsilicovolcanoconiosis", "Donaudampfschifffahrtsgesellschaftskapitän",
  "antidisestablishmentarianism", "supercalifragilisticexpialidocious", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "abababababababababababababababab", "xXxXxXxXxXxXxXxXxXxX"];

function number() {
  const len = 1 + int(25);
  let s = String(1 + int(9));
  for (let i = 1; i < len; i++) s += String(int(10));
  return pick([s, "-" + s, s + ".5", "0." + s, s.replace(/(\d)(?=(\d{3})+$)/g, "$1,"), "1e" + len, "3.14159"]);
}

const generators = [
  () => pick(english), () => pick(chinese), () => pick(japanese), () => pick(korean), () => pick(code),
  () => pick(emoji), () => pick(specials), () => pick(punctuation), () => pick(whitespace), () => pick(longWords),
  number,
];

const corpus = [];
// Every fixed item once on its own, then random mixes.
for (const list of [english, chinese, japanese, korean, code, emoji, specials, punctuation, whitespace, longWords])
  for (const s of list) corpus.push(s);
for (let n = 1; n <= 40; n++) corpus.push("9".repeat(n), String(n).repeat(n % 7 + 1));
corpus.push("", " ", "a", "\u00a0non-breaking\u00a0space", "zero\u200bwidth", "e\u0301 combining", "A\u030A",
  "x".repeat(3000), "你".repeat(500), " ".repeat(100) + "end", "\n".repeat(20), "tab\tseparated\tvalues");
while (corpus.length < 2400) {
  const parts = 1 + int(8);
  let s = "";
  for (let i = 0; i < parts; i++) {
    s += pick(generators)();
    if (rand() < 0.6) s += pick([" ", "", "\n", ", ", "  ", "\t"]);
  }
  corpus.push(s);
}

const out = join(dirname(fileURLToPath(import.meta.url)), "../data/tokenizer/corpus.jsonl");
writeFileSync(out, corpus.map((text) => JSON.stringify({ text })).join("\n") + "\n");
console.log(`wrote ${corpus.length} texts to ${out}`);
