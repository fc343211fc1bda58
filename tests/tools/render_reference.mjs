// Reference chat-template renderings from @huggingface/jinja. argv[2]: a model folder
// (tokenizer_config.json with chat_template, or chat_template.jinja); argv[3]: JSON lines of
// {"messages", "add_generation_prompt", "tools"?, "chat_template_kwargs"?}; argv[4] (optional):
// "object-arguments" turns each assistant tool call's JSON-string arguments into an object first,
// as the server does for templates that iterate over them. Writes {"text": ...} or {"error": ...}
// lines.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";

const dir = process.argv[2];
const configPath = join(dir, "tokenizer_config.json");
const config = existsSync(configPath) ? JSON.parse(readFileSync(configPath, "utf8")) : {};
const jinjaPath = join(dir, "chat_template.jinja");
const source = existsSync(jinjaPath) ? readFileSync(jinjaPath, "utf8") : config.chat_template;
const tokenText = (t) => (t && typeof t === "object" ? t.content : t ?? "");
const template = new Template(source);
const objectArguments = process.argv[4] === "object-arguments";

const lines = readFileSync(process.argv[3], "utf8").split("\n").filter((l) => l.length > 0);
for (const line of lines) {
  const { chat_template_kwargs: kwargs, ...request } = JSON.parse(line);
  if (objectArguments)
    for (const m of request.messages)
      for (const call of m.tool_calls ?? [])
        if (typeof call.function.arguments === "string") call.function.arguments = JSON.parse(call.function.arguments);
  const context = {
    ...request,
    bos_token: tokenText(config.bos_token),
    eos_token: tokenText(config.eos_token),
    ...kwargs,
  };
  try {
    process.stdout.write(JSON.stringify({ text: template.render(context) }) + "\n");
  } catch (e) {
    process.stdout.write(JSON.stringify({ error: String(e.message ?? e) }) + "\n");
  }
}
