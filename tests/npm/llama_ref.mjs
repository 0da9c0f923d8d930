// llama.cpp's greedy continuation of each prompt, through node-llama-cpp's prebuilt CPU
// build: the oracle tests/e2e/llama_cpp_oracle_test compares Tessera with.
// Usage: node llama_ref.mjs NODE_MODULES MODEL.gguf PROMPTS.jsonl N_TOKENS TOP_K TOP_STEPS
// Each line of PROMPTS.jsonl is {"text": ...}. Prints one JSON object per prompt:
//   {"prompt_ids": [...], "ids": [...], "p": [...], "top": [[[id, p], ...], ...]}
// prompt_ids is llama.cpp's tokenization (with the BOS the model's vocabulary adds); ids
// the N_TOKENS greedy tokens after it; p[i] the probability of ids[i]; top[i], for the
// first TOP_STEPS steps (none with TOP_K 0), the TOP_K most probable tokens with their
// probabilities. A step with top costs five times one without: node-llama-cpp hands over
// the whole vocabulary's probabilities as a sorted Map, so the later steps ask for the
// greedy token's probability ("confidence") alone. The KV cache is F32, one
// thread computes, and flash attention is off: llama.cpp's CPU flash attention rounds to
// F16 inside (its probabilities move by ~2e-3 on an F32 model, the KV type notwithstanding),
// so this is llama.cpp's most exact path.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, modelPath, promptsPath, nTokensArg, topKArg, topStepsArg] = process.argv.slice(2);
if (!nodeModules || !modelPath || !promptsPath || !nTokensArg || !topKArg || !topStepsArg) {
  console.error("usage: node llama_ref.mjs NODE_MODULES MODEL.gguf PROMPTS.jsonl N_TOKENS TOP_K TOP_STEPS");
  process.exit(2);
}
const nTokens = Number(nTokensArg), topK = Number(topKArg);
const topSteps = topK > 0 ? Math.min(Number(topStepsArg), nTokens) : 0;
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
// Greedy steps from `input` until `ids` holds `until` tokens; the token sampled last is
// not evaluated yet, so the next call starts from it.
async function run(input, until, withTop, ids, p, top) {
  const metadata = withTop ? { probabilities: true } : { confidence: true };
  for await (const step of sequence.evaluateWithMetadata(input, metadata, { yieldEogToken: true })) {
    ids.push(step.token);
    if (withTop) {
      const first = [];
      for (const entry of step.probabilities) {
        if (first.length >= topK) break;
        first.push(entry);
      }
      top.push(first);
      p.push(step.probabilities.get(step.token));
    } else {
      p.push(step.confidence);
    }
    if (ids.length >= until) break;
  }
}

for (const text of prompts) {
  await sequence.clearHistory();
  const promptIds = model.tokenize(text);
  if (model.tokens.shouldPrependBosToken && model.tokens.bos != null) promptIds.unshift(model.tokens.bos);
  const ids = [], top = [], p = [];
  if (topSteps > 0) await run(promptIds, topSteps, true, ids, p, top);
  if (ids.length < nTokens) await run(ids.length > 0 ? [ids[ids.length - 1]] : promptIds, nTokens, false, ids, p, top);
  process.stdout.write(JSON.stringify(topK > 0 ? { prompt_ids: promptIds, ids, p, top } : { prompt_ids: promptIds, ids, p }) + "\n");
}
await context.dispose();
await model.dispose();
