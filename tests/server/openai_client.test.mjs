// `tessera serve` through the official OpenAI client (started by run_openai_client_test.sh):
// completions, chat, streaming, and the error cases with their statuses and params.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pathToFileURL } from 'node:url';
import { OpenAI, post, require } from './client_helpers.mjs';

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

test('json_schema response_format: the output validates', async () => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 10 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      pet: { enum: ['cat', 'dog', null] },
    },
    required: ['name', 'age', 'pet'],
    additionalProperties: false,
  };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model, temperature: 1, seed, max_tokens: 200, messages: [{ role: 'user', content: 'Who are you?' }],
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const doc = JSON.parse(r.choices[0].message.content);
    assert.deepEqual(Object.keys(doc).sort(), ['age', 'name', 'pet']);
    assert.equal(typeof doc.name, 'string');
    assert.ok([...doc.name].length <= 10, doc.name);
    assert.ok(Number.isInteger(doc.age) && doc.age >= 0 && doc.age <= 120, String(doc.age));
    assert.ok(['cat', 'dog', null].includes(doc.pet));
  }
  const obj = await client.completions.create({ ...greedy, max_tokens: 300, prompt: 'x', response_format: { type: 'json_object' } });
  if (obj.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(obj.choices[0].text), 'object');
});

test('constraints that do not compile are 400s naming the parameter', async () => {
  await expectApiError(client.chat.completions.create({
    ...greedy, messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: { '^a': {} } } } },
  }), 400, 'response_format');
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', grammar: 'root ::= nothing' }), 400, 'grammar');
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', regex: '(?=a)' }), 400, 'regex');
});

test('grammar and regex extensions constrain the text', async () => {
  const g = await client.completions.create({ ...greedy, prompt: 'x', grammar: 'root ::= ("yes" | "no") "!"' });
  assert.ok(['yes!', 'no!'].includes(g.choices[0].text), g.choices[0].text);
  const r = await client.completions.create({ ...greedy, prompt: 'x', regex: '[a-z]{3} [0-9]{2}' });
  assert.match(r.choices[0].text, /^[a-z]{3} [0-9]{2}$/);
});

test('bad parameters are 400 naming them', async () => {
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', temperature: 'hot' }), 400, 'temperature');
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', max_tokens: -5 }), 400, 'max_tokens');
  await expectApiError(client.completions.create({ ...greedy, prompt: 'x', logit_bias: { abc: 1 } }), 400, 'logit_bias');
});

test('unknown model is 404, long prompt 400, bad key 401', async () => {
  await expectApiError(client.completions.create({ ...greedy, model: 'gpt-4', prompt: 'x' }), 404, 'model');
  await expectApiError(client.completions.create({ ...greedy, prompt: Array(600).fill(5) }), 400, 'prompt');
  const stranger = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await expectApiError(stranger.models.list(), 401);
});

// vLLM's token endpoints sit beside /v1 (the client has no method for them): a prompt's
// ids, as many as the completion reports as prompt_tokens, and its text back.
test('tokenize and detokenize round trip', async () => {
  const prompt = 'Once upon a time';
  const t = await post('/tokenize', { model, prompt });
  const completion = await client.completions.create({ ...greedy, prompt, max_tokens: 1 });
  assert.equal(t.count, completion.usage.prompt_tokens);
  const plain = await post('/tokenize', { model, prompt, add_special_tokens: false });
  assert.equal((await post('/detokenize', { model, tokens: plain.tokens })).prompt, prompt);
});

// Embeddings as an application asks for them: the client's default is base64 (decoded by
// the client into floats), float on request; both equal node-llama-cpp's embedding context
// on the same file, normalized. Both engines run their default f16 KV cache here, and
// llama.cpp's CPU path also rounds each query to f16 against it, which Tessera does not:
// components differ by up to ~4e-4 (the F32-KV comparison within 1e-4 is
// tests/e2e/embedding_oracle_test), so this bounds the difference at 1e-3.
test('embeddings equal node-llama-cpp\'s, as base64 and float', async () => {
  const input = ['Once upon a time', 'The little dog ran to the park.'];
  const encoded = await client.embeddings.create({ model, input });
  const floats = await client.embeddings.create({ model, input, encoding_format: 'float' });
  assert.equal(encoded.object, 'list');
  assert.deepEqual(encoded.data.map((d) => d.index), [0, 1]);
  // Two requests may be batched differently, which moves values by float rounding only.
  for (const [i, d] of encoded.data.entries()) {
    const worst = Math.max(...Array.from(d.embedding, (v, k) => Math.abs(v - floats.data[i].embedding[k])));
    assert.ok(worst <= 1e-5, `input ${i}: base64 and float differ by ${worst}`);
  }
  assert.ok(floats.usage.prompt_tokens > 0);

  const { getLlama } = await import(pathToFileURL(require.resolve('node-llama-cpp')).href);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  const llamaModel = await llama.loadModel({ modelPath: process.env.TESSERA_MODEL_PATH });
  const context = await llamaModel.createEmbeddingContext({ threads: 1 });
  for (const [i, text] of input.entries()) {
    const { vector } = await context.getEmbeddingFor(text);
    const norm = Math.hypot(...vector);
    const got = floats.data[i].embedding;
    assert.equal(got.length, vector.length);
    const worst = Math.max(...vector.map((v, k) => Math.abs(v / norm - got[k])));
    assert.ok(worst <= 1e-3, `input ${i}: largest component difference ${worst}`);
  }
  await context.dispose();
  await llamaModel.dispose();
});

test('embedding errors name their parameter', async () => {
  await expectApiError(client.embeddings.create({ model, input: 'x', dimensions: 3 }), 400, 'dimensions');
  await expectApiError(client.embeddings.create({ model, input: '' }), 400, 'input');
  await expectApiError(client.embeddings.create({ model: 'text-embedding-3-small', input: 'x' }), 404, 'model');
});

// The Responses API as the client uses it: whole and streamed (the same greedy text), the
// conversation continued with previous_response_id, store: false keeping nothing, and
// text.format's JSON Schema.
test('responses: whole, streamed, previous_response_id', async () => {
  const request = { model, input: 'Once upon a time', max_output_tokens: 16, temperature: 0 };
  const whole = await client.responses.create(request);
  assert.equal(whole.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(whole.status));
  assert.ok(whole.output_text.length > 0);
  assert.equal(whole.usage.total_tokens, whole.usage.input_tokens + whole.usage.output_tokens);
  let text = '';
  let last = null;
  for await (const event of await client.responses.create({ ...request, stream: true })) {
    if (event.type === 'response.output_text.delta') text += event.delta;
    last = event;
  }
  assert.equal(text, whole.output_text);
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), last.type);
  assert.equal(last.response.output[0].content[0].text, whole.output_text);

  const next = await client.responses.create({
    model, previous_response_id: whole.id, input: 'And then?', max_output_tokens: 8, temperature: 0,
  });
  assert.ok(next.usage.input_tokens >= whole.usage.input_tokens + whole.usage.output_tokens,
    'the earlier turn is in the prompt');
  const unstored = await client.responses.create({ ...request, store: false });
  await expectApiError(client.responses.create({ model, previous_response_id: unstored.id, input: 'x' }), 404,
    'previous_response_id');
});

test('responses: text.format json_schema', async () => {
  const schema = {
    type: 'object', properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer' } },
    required: ['name', 'age'], additionalProperties: false,
  };
  const r = await client.responses.create({
    model, input: 'Tell me about Lily.', max_output_tokens: 60, temperature: 0,
    text: { format: { type: 'json_schema', name: 'person', schema, strict: true } },
  });
  const value = JSON.parse(r.output_text);
  assert.equal(typeof value.name, 'string');
  assert.ok(Number.isInteger(value.age));
});
