// Tool calling and thinking budgets through the official OpenAI client, as an agent
// framework uses them, against `tessera serve` on a synth Qwen3 (its real chat template and
// vocabulary, random weights; started by run_openai_client_test.sh). Calls forced by tool_choice "required" or a named
// function must parse and their arguments validate against the function's schema (ajv);
// a whole round trip (call, tool result, answer) renders the history into the prompt.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pathToFileURL } from 'node:url';
import { OpenAI, post, require } from './client_helpers.mjs';

const ajvModule = await import(pathToFileURL(require.resolve('ajv')).href);
const Ajv = ajvModule.default?.default ?? ajvModule.default;

const client = new OpenAI({ baseURL: `${process.env.TESSERA_URL}/v1`, apiKey: process.env.TESSERA_API_KEY, maxRetries: 0 });
const model = (await client.models.list()).data[0].id;
// Room for kMaxParallelToolCalls (8) calls: random weights end a reply only where the
// grammar allows nothing more.
const greedy = { model, temperature: 0, max_tokens: 400 };

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The current weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', enum: ['Oslo', 'Rome', 'Lima'] }, unit: { type: 'string', enum: ['c', 'f'] } },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'The time in a time zone',
      parameters: {
        type: 'object', properties: { zone: { type: 'string', maxLength: 12 } }, required: ['zone'], additionalProperties: false,
      },
    },
  },
];
const ajv = new Ajv();
const validators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
const question = [{ role: 'user', content: 'What is the weather in Oslo?' }];

function checkCalls(calls, names) {
  assert.ok(Array.isArray(calls) && calls.length > 0, 'no tool calls');
  for (const call of calls) {
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_/);
    assert.ok(names.includes(call.function.name), call.function.name);
    const validate = validators[call.function.name];
    assert.ok(validate(JSON.parse(call.function.arguments)), JSON.stringify(validate.errors));
  }
}


async function renderedPrompt(body) {
  const { tokens } = await post('/tokenize', { model, ...body });
  return (await post('/detokenize', { model, tokens })).prompt;
}

test('required: calls whose arguments follow the schema', async () => {
  const r = await client.chat.completions.create({ ...greedy, messages: question, tools, tool_choice: 'required' });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  checkCalls(choice.message.tool_calls, ['get_weather', 'get_time']);
});

test('a named function is the one called, once without parallel calls', async () => {
  const r = await client.chat.completions.create({
    ...greedy, messages: question, tools, parallel_tool_calls: false,
    tool_choice: { type: 'function', function: { name: 'get_time' } },
  });
  const calls = r.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  checkCalls(calls, ['get_time']);
});

test('streamed calls equal the whole ones', async () => {
  const request = { ...greedy, messages: question, tools, tool_choice: 'required' };
  const whole = (await client.chat.completions.create(request)).choices[0].message.tool_calls;
  const streamed = [];
  let finish = null;
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    const choice = chunk.choices[0];
    finish = choice?.finish_reason ?? finish;
    for (const d of choice?.delta?.tool_calls ?? []) {
      streamed[d.index] ??= { id: d.id, type: d.type, function: { name: '', arguments: '' } };
      streamed[d.index].function.name += d.function?.name ?? '';
      streamed[d.index].function.arguments += d.function?.arguments ?? '';
    }
  }
  assert.equal(finish, 'tool_calls');
  checkCalls(streamed, ['get_weather', 'get_time']);
  assert.deepEqual(streamed.map((c) => c.function), whole.map((c) => c.function));
});

test('round trip: the call and its result reach the prompt, and auto answers', async () => {
  const first = await client.chat.completions.create({
    ...greedy, messages: question, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const call = first.choices[0].message.tool_calls[0];
  const history = [
    ...question,
    first.choices[0].message,
    { role: 'tool', tool_call_id: call.id, content: '{"temperature": -3, "sky": "snow"}' },
  ];
  const answer = await client.chat.completions.create({ ...greedy, messages: history, tools, tool_choice: 'auto' });
  assert.ok(['stop', 'length', 'tool_calls'].includes(answer.choices[0].finish_reason));
  const prompt = await renderedPrompt({ messages: history, tools });
  assert.ok(prompt.includes('<tool_response>\n{"temperature": -3, "sky": "snow"}\n</tool_response>'), prompt);
  assert.ok(prompt.includes(`<tool_call>\n{"name": "get_weather", "arguments": ${JSON.stringify(JSON.parse(call.function.arguments))}`) ||
            prompt.includes('"name": "get_weather", "arguments":'), prompt);
  assert.ok(prompt.includes('"name": "get_time"'), 'the tools are listed in the system turn');
});

// auto: the model chooses; once it starts a call (Qwen's <tool_call> token, pushed here by
// logit_bias since the weights are random) the call grammar takes over, so the call parses.
test('auto: a call the model starts follows the schema', async () => {
  const { tokens } = await post('/tokenize', { model, prompt: '<tool_call>', add_special_tokens: false });
  assert.equal(tokens.length, 1, 'Qwen3 spells <tool_call> as one token');
  const r = await client.chat.completions.create({
    ...greedy, messages: question, tools, tool_choice: 'auto', logit_bias: { [tokens[0]]: 100 },
  });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  checkCalls(r.choices[0].message.tool_calls, ['get_weather', 'get_time']);
  const free = await client.chat.completions.create({ ...greedy, max_tokens: 16, messages: question, tools });
  assert.equal(free.choices[0].message.tool_calls, undefined, 'without a call the reply is content');
});

test('tool_choice none keeps the tools out of the prompt', async () => {
  assert.ok(!(await renderedPrompt({ messages: question, tools, tool_choice: 'none' })).includes('get_weather'));
  const r = await client.chat.completions.create({ ...greedy, max_tokens: 8, messages: question, tools, tool_choice: 'none' });
  assert.equal(r.choices[0].message.tool_calls, undefined);
});

test('bad tools and choices are 400s naming the parameter', async () => {
  const expect400 = async (body, param) => {
    await assert.rejects(client.chat.completions.create({ ...greedy, messages: question, ...body }), (err) => {
      assert.equal(err.status, 400, err.message);
      assert.equal(err.param, param);
      return true;
    });
  };
  await expect400({ tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools');
  await expect400({ tools, tool_choice: { type: 'function', function: { name: 'get_news' } } }, 'tool_choice');
  await expect400({ tool_choice: 'required' }, 'tool_choice');
  await expect400({ tools, tool_choice: 'required', response_format: { type: 'json_object' } }, 'tool_choice');
  await expect400({
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', not: {} } } }], tool_choice: 'required',
  }, 'tool_choice');
});

// A thinking budget of 32 tokens: the <think> block (opened here by logit_bias on Qwen3's
// <think> token, which also fills it, the weights being random) is closed within 32 tokens
// and the reply goes on after it; reasoning_content and content come apart, whole and
// streamed. Without the budget the block never closes.
test('max_reasoning_tokens closes the block and the answer follows', async () => {
  const { tokens } = await post('/tokenize', { model, prompt: '<think>', add_special_tokens: false });
  assert.equal(tokens.length, 1);
  const request = { ...greedy, max_tokens: 64, messages: question, logit_bias: { [tokens[0]]: 100 } };
  const free = await client.chat.completions.create(request);
  assert.equal(free.choices[0].message.content, '');
  assert.ok(free.choices[0].message.reasoning_content.length > 0);
  const budgeted = await client.chat.completions.create({ ...request, max_reasoning_tokens: 32 });
  const message = budgeted.choices[0].message;
  const inside = await post('/tokenize', { model, prompt: message.reasoning_content, add_special_tokens: false });
  assert.ok(inside.count <= 32, `${inside.count} tokens of reasoning`);
  assert.ok(message.content.length > 0, 'the answer follows the block');
  let reasoning = '';
  let content = '';
  for await (const chunk of await client.chat.completions.create({ ...request, max_reasoning_tokens: 32, stream: true })) {
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
    content += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(reasoning.trim(), message.reasoning_content);
  assert.equal(content, message.content);
  await assert.rejects(client.chat.completions.create({ ...request, reasoning_effort: 'extreme' }), (e) => e.status === 400);
});

// Responses with function tools: a required call comes back as a function_call item whose
// arguments validate; its output goes back with previous_response_id, and the answer follows.
test('responses: function calls and their outputs', async () => {
  const flat = tools.map((t) => ({ type: 'function', ...t.function }));
  const first = await client.responses.create({
    model, input: 'What is the weather in Oslo?', tools: flat, tool_choice: 'required', temperature: 0, max_output_tokens: 400,
  });
  const calls = first.output.filter((item) => item.type === 'function_call');
  assert.ok(calls.length > 0, JSON.stringify(first.output));
  checkCalls(calls.map((c) => ({ id: c.call_id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
    ['get_weather', 'get_time']);
  const answer = await client.responses.create({
    model, previous_response_id: first.id, tools: flat, temperature: 0, max_output_tokens: 16,
    input: calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: '{"temperature": -3}' })),
  });
  assert.ok(answer.usage.input_tokens > first.usage.input_tokens, 'the call and its output are in the prompt');
  let streamedCalls = 0;
  for await (const event of await client.responses.create({
    model, input: 'Weather?', tools: flat, tool_choice: 'required', temperature: 0, max_output_tokens: 400, stream: true,
  })) {
    if (event.type === 'response.output_item.done' && event.item.type === 'function_call') ++streamedCalls;
  }
  assert.ok(streamedCalls > 0);
});
