// llama.cpp's embedding of each prompt, through node-llama-cpp's prebuilt CPU build: the
// oracle tests/e2e/embedding_oracle_test compares Tessera's /v1/embeddings path with.
// Usage: node llama_embed_ref.mjs NODE_MODULES MODEL.gguf PROMPTS.jsonl
// Each line of PROMPTS.jsonl is {"text": ...}. Prints one JSON object per prompt:
//   {"ids": [...], "embedding": [...]}
// ids are the tokens embedded: llama.cpp's tokenization with BOS and EOS as the vocabulary
// adds them (what LlamaEmbeddingContext adds); embedding is what llama.cpp returns for
// them, pooled as the file's pooling_type says (none: the last token's output-norm state)
// and not normalized. The context is llama.cpp's embedding context (createEmbeddingContext)
// with the oracle's exact settings: F32 KV, one thread, flash attention off.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, modelPath, promptsPath] = process.argv.slice(2);
if (!nodeModules || !modelPath || !promptsPath) {
  console.error("usage: node llama_embed_ref.mjs NODE_MODULES MODEL.gguf PROMPTS.jsonl");
  process.exit(2);
}
const { getLlama, LlamaEmbeddingContext } =
  await import(pathToFileURL(join(nodeModules, "node-llama-cpp/dist/index.js")).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath });
const prompts = readFileSync(promptsPath, "utf8").split("\n").filter((l) => l.length > 0)
  .map((l) => JSON.parse(l).text);

function embeddedIds(text) {
  const ids = model.tokenize(text);
  if (model.tokens.shouldPrependBosToken && model.tokens.bos != null) ids.unshift(model.tokens.bos);
  if (model.tokens.shouldAppendEosToken && model.tokens.eos != null) ids.push(model.tokens.eos);
  return ids;
}

const inputs = prompts.map(embeddedIds);
// createEmbeddingContext's own context, with the KV type and attention path pinned.
const context = await model.createContext({
  contextSize: Math.max(...inputs.map((ids) => ids.length)) + 8, batchSize: 512, threads: 1, sequences: 1,
  flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
  _embeddings: true,
});
const embedder = new LlamaEmbeddingContext({ _llamaContext: context });
for (const ids of inputs) {
  const { vector } = await embedder.getEmbeddingFor([...ids]);
  process.stdout.write(JSON.stringify({ ids, embedding: Array.from(vector) }) + "\n");
}
await embedder.dispose();
await model.dispose();
