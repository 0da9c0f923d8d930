// What the `openai` client tests share: the client's module, resolved from tests/npm, and
// plain calls to the endpoints beside /v1 (the client has no method for them).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

export const require = createRequire(`${process.env.TESSERA_NPM_DIR}/package.json`);
const mod = await import(pathToFileURL(require.resolve('openai')).href);
export const OpenAI = mod.OpenAI ?? mod.default?.OpenAI ?? mod.default;

export async function post(path, body) {
  const r = await fetch(`${process.env.TESSERA_URL}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${process.env.TESSERA_API_KEY}` },
    body: JSON.stringify(body),
  });
  assert.equal(r.status, 200);
  return r.json();
}
