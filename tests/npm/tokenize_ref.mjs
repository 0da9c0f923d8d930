// llama.cpp's tokenization of each text of a JSONL file, through node-llama-cpp's prebuilt
// CPU build, from a GGUF file's vocabulary alone: the oracle for the tokenizers whose
// references no file in ../shared holds (o200k).
// Usage: node tokenize_ref.mjs NODE_MODULES MODEL.gguf FILE.jsonl
// Prints one JSON array of ids per line of FILE.jsonl ({"text": ...}), without BOS and
// with special-token text read as plain text, as Tokenizer::encode(text, false, false).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, modelPath, file] = process.argv.slice(2);
if (!nodeModules || !modelPath || !file) {
  console.error("usage: node tokenize_ref.mjs NODE_MODULES MODEL.gguf FILE.jsonl");
  process.exit(2);
}
const { getLlama } = await import(pathToFileURL(join(nodeModules, "node-llama-cpp/dist/index.js")).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath, vocabOnly: true });
const lines = readFileSync(file, "utf8").split("\n").filter((line) => line.length > 0);
const out = lines.map((line) => JSON.stringify(Array.from(model.tokenize(JSON.parse(line).text, false))));
process.stdout.write(out.join("\n") + "\n");
