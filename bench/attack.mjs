// The hostile-client attacks of issue 25, each against a live `tessera serve` on loopback,
// bounded in time; prints one line per check with its measurement and PASS/FAIL against
// the issue's bound. Run through bench/attack.sh (which starts the server).
//
//   node bench/attack.mjs PORT SERVER_PID CACHE_MEMORY_BYTES
import net from 'node:net';
import fs from 'node:fs';

const [port, pid, cacheMemory] = process.argv.slice(2).map(Number);
const host = '127.0.0.1';
let failures = 0;

function report(name, ok, detail) {
  if (!ok) ++failures;
  console.log(`${ok ? 'PASS' : 'FAIL'}  ${name}: ${detail}`);
}

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

async function request(path, body, { timeoutMs = 60000 } = {}) {
  const t0 = process.hrtime.bigint();
  const init = body === undefined ? {} : { method: 'POST', headers: { 'Content-Type': 'application/json' }, body };
  const res = await fetch(`http://${host}:${port}${path}`, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  return { status: res.status, text, ms: ms(t0) };
}

// Time to the first streamed token of a short completion.
async function ttft(extra = {}) {
  const t0 = process.hrtime.bigint();
  const res = await fetch(`http://${host}:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4, temperature: 0, stream: true, ...extra }),
  });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let first = Infinity;
  for (let seen = ''; ;) {  // heartbeats (": keep-alive") are not tokens
    const { value, done } = await reader.read();
    if (done) break;
    seen += decoder.decode(value);
    if (first === Infinity && seen.includes('data: {')) first = ms(t0);
  }
  return first;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rssMiB = () => {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]) / 1024;
};
const alive = async () => (await request('/health')).status === 200;

function nested(depth, open, inner, close) {
  return open.repeat(depth) + inner + close.repeat(depth);
}

async function crashes() {
  const longName = JSON.stringify({ type: 'object', properties: { ['k'.repeat(20000)]: { type: 'string' } } });
  const deep = nested(100000, '{"allOf":[', '{}', ']}');
  const cases = [
    ['20,000-char property name', { prompt: 'x', max_tokens: 1, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: JSON.parse(longName) } } }],
    ['allOf nested 100,000 deep (guided_json string)', { prompt: 'x', max_tokens: 1, guided_json: deep }],
    ['allOf nested 100,000 deep (constraint.text)', { prompt: 'x', max_tokens: 1, constraint: { kind: 'json_schema', text: deep } }],
    ['anyOf nested 100,000 deep', { prompt: 'x', max_tokens: 1, guided_json: nested(100000, '{"anyOf":[', '{}', ']}') }],
  ];
  for (const [name, body] of cases) {
    const r = await request('/v1/completions', JSON.stringify(body));
    report(`crash reproducer: ${name}`, r.status < 500 && (await alive()), `HTTP ${r.status} in ${r.ms.toFixed(0)} ms, server alive`);
  }
}

// Sockets that send a header one byte a second.
function slowloris(count) {
  const sockets = [];
  const line = 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(4096);
  for (let i = 0; i < count; ++i) {
    const s = net.connect(port, host);
    s.on('error', () => {});
    let at = 0;
    s.timer = setInterval(() => { if (at < line.length) s.write(line[at++]); }, 1000);
    sockets.push(s);
  }
  return () => sockets.forEach((s) => { clearInterval(s.timer); s.destroy(); });
}

async function slowlorisAttack() {
  const idle = [];
  for (let i = 0; i < 5; ++i) idle.push((await request('/health')).ms);
  const idleTtft = median([await ttft(), await ttft(), await ttft()]);
  const stop = slowloris(1000);
  await new Promise((r) => setTimeout(r, 3000));
  const health = [];
  for (let i = 0; i < 20; ++i) health.push((await request('/health', undefined, { timeoutMs: 5000 })).ms);
  const loadedTtft = median([await ttft(), await ttft(), await ttft()]);
  stop();
  const worst = Math.max(...health);
  report('slowloris: /health with 1,000 slow sockets open', worst < 100,
         `max ${worst.toFixed(1)} ms over 20 probes (idle ${median(idle).toFixed(1)} ms)`);
  report('slowloris: a completion is served normally', loadedTtft < 2 * idleTtft + 50,
         `TTFT ${loadedTtft.toFixed(1)} ms (idle ${idleTtft.toFixed(1)} ms)`);
}

function rawExchange(bytes, { halfClose = false } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(port, host, () => {
      s.write(bytes);
      if (halfClose) s.end();
    });
    let out = '';
    s.on('data', (d) => { out += d; });
    s.on('close', () => resolve(out));
    s.on('error', () => resolve(out));
    s.setTimeout(10000, () => s.destroy());
  });
}

async function framing() {
  const half = await rawExchange('GET /health HTTP/1.1\r\nHost: x\r\n\r\n', { halfClose: true });
  report('half-closed client is answered', half.startsWith('HTTP/1.1 200'), JSON.stringify(half.slice(0, 15)));
  const two = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
  const piped = await rawExchange(two);
  const answers = piped.split('HTTP/1.1 200').length - 1;
  report('pipelined requests are all answered', answers === 2, `${answers} of 2 answered`);
}

async function amplification() {
  const prompts = Array.from({ length: 1000 }, (_, i) => `p${i}`);
  const big = await request('/v1/completions', JSON.stringify({ prompt: prompts, n: 128, max_tokens: 1 }));
  report('amplification: 1,000 prompts x n 128 is refused', big.status === 400 && big.text.includes('too_many_choices'),
         `HTTP ${big.status} in ${big.ms.toFixed(0)} ms`);
  // The most one call may ask for, running while a normal request arrives (it must still
  // be running when the last probe ends, or the probes measured an idle server).
  for (let i = 0; i < 3; ++i) await ttft();  // a fresh server's first requests fault its memory in
  const idle = [];
  for (let i = 0; i < 5; ++i) idle.push(await ttft());
  let callEnded = 0;
  const allowed = request('/v1/completions', JSON.stringify({ prompt: prompts.slice(0, 8), n: 16, max_tokens: 96, temperature: 1, ignore_eos: true }), { timeoutMs: 300000 })
    .then((r) => { callEnded = Date.now(); return r; });
  await new Promise((r) => setTimeout(r, 500));
  const loaded = [];
  for (let i = 0; i < 5; ++i) loaded.push(await ttft());
  const probesEnded = Date.now();
  const done = await allowed;
  // The floor: beside one ordinary request, a new one waits for the step in flight too.
  const one = request('/v1/completions', JSON.stringify({ prompt: 'p', max_tokens: 96, temperature: 1, ignore_eos: true }), { timeoutMs: 300000 });
  await new Promise((r) => setTimeout(r, 300));
  const beside = [];
  for (let i = 0; i < 5; ++i) beside.push(await ttft());
  await one;
  console.log(`info  TTFT beside one ordinary 96-token request: median ${median(beside).toFixed(1)} ms (${(median(beside) / median(idle)).toFixed(2)}x idle)`);
  const ratio = median(loaded) / median(idle);
  report('amplification: TTFT beside a 128-choice call', ratio < 2 && callEnded > probesEnded,
         `median ${median(loaded).toFixed(1)} ms vs ${median(idle).toFixed(1)} ms idle (${ratio.toFixed(2)}x); the call: HTTP ${done.status}, ` +
         `${callEnded > probesEnded ? 'still running after the probes' : 'ended before the probes did'}`);
}

async function memory() {
  const before = rssMiB();
  let peak = before;
  for (let i = 0; i < 100; ++i) {
    // ~1 MB of alternatives, distinct per request.
    const choices = Array.from({ length: 8000 }, (_, j) => `choice-${i}-${j}-${'x'.repeat(110)}`);
    await request('/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 1, guided_choice: choices }), { timeoutMs: 120000 });
    peak = Math.max(peak, rssMiB());
    if (i % 10 === 9) process.stderr.write('.');
  }
  process.stderr.write('\n');
  await new Promise((r) => setTimeout(r, 2000));  // the engine trims the heap once idle
  const after = rssMiB();
  report('memory: 100 distinct 1 MB constraints', after - before < cacheMemory / 2 ** 20 + 200,
         `resident ${before.toFixed(0)} -> ${after.toFixed(0)} MiB once idle, peak ${peak.toFixed(0)} MiB while compiling (bound: cache_memory ${cacheMemory / 2 ** 20} MiB + 200 MiB)`);
  const tenMB = await request('/v1/completions', JSON.stringify({ prompt: 'a '.repeat(5 << 20), max_tokens: 1 }));
  report('memory: a 10 MB prompt is refused fast', tenMB.status === 400 && tenMB.ms < 100, `HTTP ${tenMB.status} in ${tenMB.ms.toFixed(1)} ms`);
}

async function compileCost() {
  const plainBody = JSON.stringify({ prompt: 'x', max_tokens: 1, response_format: { type: 'json_object' } });
  const idle = [];
  for (let i = 0; i < 3; ++i) idle.push((await request('/v1/completions', plainBody)).ms);
  const costly = [
    request('/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 1, regex: '(.*){1000}' })),
    request('/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 1, guided_json: { enum: Array.from({ length: 100000 }, (_, i) => `v${i}`) } })),
    request('/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 1, guided_json: nested(10000, '{"type":"object","properties":{"a":', '{}', '}}') })),
  ];
  await new Promise((r) => setTimeout(r, 300));
  const plain = await request('/v1/completions', plainBody);
  const results = await Promise.all(costly);
  report('compile: json_object beside costly schemas', plain.ms < 2000,
         `${plain.ms.toFixed(0)} ms (idle ${median(idle).toFixed(0)} ms); costly ones: ${results.map((r) => `HTTP ${r.status} in ${(r.ms / 1000).toFixed(1)} s`).join(', ')}`);
}

const attacks = { crashes, slowloris: slowlorisAttack, framing, amplification, memory, compile: compileCost };
const only = process.env.ATTACKS ? process.env.ATTACKS.split(',') : Object.keys(attacks);
for (const name of only) {
  console.error(`attack: ${name}`);
  await attacks[name]();
  if (!(await alive())) report(`server alive after ${name}`, false, 'no answer to /health');
}
process.exit(failures ? 1 : 0);
