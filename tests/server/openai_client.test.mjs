// `tessera serve` through the official OpenAI client (started by run_openai_client_test.sh):
// completions, chat, streaming, and the error cases with their statuses and params.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// The openai package lives in tests/npm, not beside this file.
const require = createRequire(`${process.env.TESSERA_NPM_DIR}/package.json`);
const mod = await import(pathToFileURL(require.resolve('openai')).href);
const OpenAI = mod.OpenAI ?? mod.default?.OpenAI ?? mod.default;

const baseURL = `${process.env.TESSERA_URL}/v1`;
const client = new OpenAI({ baseURL, apiKey: process.env.TESSERA_API_KEY, maxRetries: 0 });
const model = 'stories260K';
const greedy = { model, temperature: 0, max_tokens: 24 };

async function expectApiError(promise, status, param) {
  await assert.rejects(promise, (err) => {
    assert.equal(err.status, status, err.message);
    if (param !== undefined) assert.equal(err.param, param);
    assert.equal(typeof err.error?.message, 'string');
    return true;
  });
}

test('models', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [model]);
});

test('completion', async () => {
  const r = await client.completions.create({ ...greedy, prompt: 'Once upon a time' });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.choices[0].text.length > 0);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('streamed completion equals the whole one, usage last', async () => {
  const whole = await client.completions.create({ ...greedy, prompt: 'Once upon a time' });
  const stream = await client.completions.create({
    ...greedy, prompt: 'Once upon a time', stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) text += c.text;
  }
  assert.equal(text, whole.choices[0].text);
  assert.deepEqual(usage, whole.usage);
});

test('chat, whole and streamed', async () => {
  const messages = [{ role: 'user', content: 'Tell me a story.' }];
  const whole = await client.chat.completions.create({ ...greedy, messages });
  assert.equal(whole.choices[0].message.role, 'assistant');
  const stream = await client.chat.completions.create({ ...greedy, messages, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
});

test('n choices with a seed are reproducible', async () => {
  const req = { model, prompt: 'Once', max_tokens: 12, temperature: 1, seed: 3, n: 2 };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  assert.equal(a.choices.length, 2);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
});

test('json_schema response_format is refused until constrained decoding lands', async () => {
  await expectApiError(client.chat.completions.create({
    ...greedy, messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } },
  }), 400, 'response_format');
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', grammar: 'root ::= "a"' }), 400, 'grammar');
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', regex: 'a+' }), 400, 'regex');
});

test('bad parameters are 400 naming them', async () => {
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', temperature: 'hot' }), 400, 'temperature');
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', max_tokens: -5 }), 400, 'max_tokens');
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', logit_bias: { abc: 1 } }), 400, 'logit_bias');
});

test('unknown model is 404, long prompt 413, bad key 401', async () => {
  await expectApiError(client.completions.create({ ...greedy, model: 'gpt-4', prompt: 'x' }), 404, 'model');
  await expectApiError(client.completions.create({ ...greedy, prompt: Array(600).fill(5) }), 413, 'prompt');
  const stranger = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await expectApiError(stranger.models.list(), 401);
});
