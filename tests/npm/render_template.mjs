// Hugging Face's rendering of chat templates (@huggingface/jinja, the renderer of
// transformers.js, with trim_blocks and lstrip_blocks on as apply_chat_template has them):
// the second renderer core/chat's tests compare Tessera's Jinja with.
// Usage: node render_template.mjs NODE_MODULES CASES.json
// CASES.json is an array of {"template": TEXT, "context": {messages, add_generation_prompt,
// bos_token, eos_token, tools, ...}}; prints one JSON line per case: {"text": RENDERED} or
// {"error": MESSAGE} when the template raised or failed.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, casesPath] = process.argv.slice(2);
if (!nodeModules || !casesPath) {
  console.error("usage: node render_template.mjs NODE_MODULES CASES.json");
  process.exit(2);
}
const { Template } = await import(pathToFileURL(join(nodeModules, "@huggingface/jinja/dist/index.js")).href);
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
const out = cases.map(({ template, context }) => {
  try {
    return JSON.stringify({ text: new Template(template).render(context) });
  } catch (e) {
    return JSON.stringify({ error: String(e.message ?? e) });
  }
});
process.stdout.write(out.join("\n") + "\n");
