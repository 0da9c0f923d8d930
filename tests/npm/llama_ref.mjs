// llama.cpp's greedy continuation of each prompt, through node-llama-cpp's prebuilt CPU
// build: the oracle tests/e2e/llama_cpp_oracle_test compares Tessera with.
// Usage: node llama_ref.mjs NODE_MODULES MODEL.gguf PROMPTS.jsonl N_TOKENS TOP_K
// Each line of PROMPTS.jsonl is {"text": ...}. Prints one JSON object per prompt:
//   {"prompt_ids": [...], "ids": [...], "top": [[[id, p], ...], ...]}
// prompt_ids is llama.cpp's tokenization (with the BOS the model's vocabulary adds); ids
// the N_TOKENS greedy tokens after it; top[i] the TOP_K most probable tokens, with their
// probabilities, of the distribution ids[i] was drawn from. TOP_K 0 gives "p" instead,
// the probability of each greedy token, five times faster: for "top", node-llama-cpp
// hands over the whole vocabulary's probabilities as a sorted Map at every step. The KV cache is F32, one
// thread computes, and flash attention is off: llama.cpp's CPU flash attention rounds to
// F16 inside (its probabilities move by ~2e-3 on an F32 model, the KV type notwithstanding),
// so this is llama.cpp's most exact path.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, modelPath, promptsPath, nTokensArg, topKArg] = process.argv.slice(2);
if (!nodeModules || !modelPath || !promptsPath || !nTokensArg || !topKArg) {
  console.error("usage: node llama_ref.mjs NODE_MODULES MODEL.gguf PROMPTS.jsonl N_TOKENS TOP_K");
  process.exit(2);
}
const nTokens = Number(nTokensArg), topK = Number(topKArg);
const { getLlama } = await import(pathToFileURL(join(nodeModules, "node-llama-cpp/dist/index.js")).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath });
const prompts = readFileSync(promptsPath, "utf8").split("\n").filter((l) => l.length > 0)
  .map((l) => JSON.parse(l).text);
const maxPrompt = Math.max(...prompts.map((p) => model.tokenize(p).length + 1));
const context = await model.createContext({
  contextSize: maxPrompt + nTokens + 8, batchSize: 512, threads: 1, sequences: 1, flashAttention: false,
  experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
});
const sequence = context.getSequence();
for (const text of prompts) {
  await sequence.clearHistory();
  const promptIds = model.tokenize(text);
  if (model.tokens.shouldPrependBosToken && model.tokens.bos != null) promptIds.unshift(model.tokens.bos);
  const ids = [], top = [], p = [];
  const metadata = topK > 0 ? { probabilities: true } : { confidence: true };
  const steps = sequence.evaluateWithMetadata(promptIds, metadata, { yieldEogToken: true });
  for await (const step of steps) {
    ids.push(step.token);
    if (topK > 0) top.push([...step.probabilities.entries()].slice(0, topK));
    else p.push(step.confidence);
    if (ids.length >= nTokens) break;
  }
  process.stdout.write(JSON.stringify(topK > 0 ? { prompt_ids: promptIds, ids, top } : { prompt_ids: promptIds, ids, p }) + "\n");
}
await context.dispose();
await model.dispose();
