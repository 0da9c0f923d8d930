// llama.cpp's prefill and decode speed on a GGUF, through node-llama-cpp's prebuilt CPU
// build: the baseline bench/vs_llama_cpp.sh sets Tessera against, on the same file in the
// same run. Usage: node llama_cpp_bench.mjs NODE_MODULES MODEL.gguf PROMPT_TOKENS GEN_TOKENS THREADS
// Prints one JSON line: {"prefill_tps": ..., "decode_tps": ..., "prompt_tokens": ..., "gen_tokens": ...}.
// Settings are llama.cpp's defaults (F16 KV, flash attention as it picks), as a user runs it.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, modelPath, promptArg, genArg, threadsArg] = process.argv.slice(2);
if (!nodeModules || !modelPath || !promptArg || !genArg || !threadsArg) {
  console.error("usage: node llama_cpp_bench.mjs NODE_MODULES MODEL.gguf PROMPT_TOKENS GEN_TOKENS THREADS");
  process.exit(2);
}
const nPrompt = Number(promptArg), nGen = Number(genArg), threads = Number(threadsArg);
const { getLlama } = await import(pathToFileURL(join(nodeModules, "node-llama-cpp/dist/index.js")).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize: nPrompt + nGen + 16, batchSize: 512, threads, sequences: 1 });
const sequence = context.getSequence();
// A prompt of ordinary text tokens, cycled to the length asked.
const text = model.tokenize("The quick brown fox jumps over the lazy dog while the band plays on. ");
const prompt = Array.from({ length: nPrompt }, (_, i) => text[i % text.length]);

const t0 = performance.now();
await sequence.evaluateWithoutGeneratingNewTokens(prompt);
const t1 = performance.now();
console.error(`llama.cpp: prefill of ${nPrompt} tokens in ${((t1 - t0) / 1000).toFixed(2)} s`);
let n = 0;
const t2 = performance.now();
for await (const _ of sequence.evaluate([prompt[prompt.length - 1]], { temperature: 0 })) {
  if (++n >= nGen) break;
}
const t3 = performance.now();
console.error(`llama.cpp: ${nGen} decode steps in ${((t3 - t2) / 1000).toFixed(2)} s`);
process.stdout.write(JSON.stringify({
  prefill_tps: nPrompt / ((t1 - t0) / 1000), decode_tps: nGen / ((t3 - t2) / 1000),
  prompt_tokens: nPrompt, gen_tokens: nGen,
}) + "\n");
await context.dispose();
await model.dispose();
