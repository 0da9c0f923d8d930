#!/usr/bin/env node
// HTTP serving load test for `tessera serve` (or any OpenAI-compatible server):
//
//   node bench/serving_load.mjs --url http://127.0.0.1:8080 [--pid PID] [--json]
//
// For each concurrency level of the sweep it sends --requests streamed completions with
// Poisson arrivals (--rate req/s; "inf": all at once, capped by the concurrency), prompt
// and output lengths drawn uniformly from --prompt-len / --output-len ranges, a share of
// prompts starting with one common prefix (--shared-prefix), and aborts a fraction of
// the streams midway (--disconnect). It reports throughput, TTFT and TPOT p50/p99 and
// goodput under the SLOs, and checks that
//   * no request that was not aborted failed,
//   * streamed greedy text equals the non-streamed text for the same request,
//   * the KV pool is whole afterwards (/metrics: no block used, all free),
//   * the server's RSS (/proc/PID/status, with --pid) stays flat across --rounds rounds.
// Exits 1 when a check fails. With --json the last stdout line is one JSON object.
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    model: { type: 'string' },
    'api-key': { type: 'string', default: '' },
    pid: { type: 'string' },
    concurrency: { type: 'string', default: '1,4,16' },
    requests: { type: 'string', default: '64' },
    rate: { type: 'string', default: 'inf' },
    'prompt-len': { type: 'string', default: '16-128' },  // words
    'output-len': { type: 'string', default: '16-64' },   // tokens
    'shared-prefix': { type: 'string', default: '0.5' },  // share of prompts with the common prefix
    'prefix-len': { type: 'string', default: '64' },      // words
    disconnect: { type: 'string', default: '0.1' },
    rounds: { type: 'string', default: '3' },
    'slo-ttft-ms': { type: 'string', default: '1000' },
    'slo-tpot-ms': { type: 'string', default: '100' },
    seed: { type: 'string', default: '1' },
    json: { type: 'boolean', default: false },
  },
});

const log = (...a) => console.error(...a);
const headers = { 'Content-Type': 'application/json', ...(opt['api-key'] ? { Authorization: `Bearer ${opt['api-key']}` } : {}) };

// A small seeded generator so that runs are comparable.
let rngState = BigInt(opt.seed) || 1n;
function random() {
  rngState ^= rngState << 13n; rngState &= (1n << 64n) - 1n;
  rngState ^= rngState >> 7n;
  rngState ^= rngState << 17n; rngState &= (1n << 64n) - 1n;
  return Number(rngState >> 11n) / 2 ** 53;
}
const range = (s) => { const [lo, hi] = s.split('-').map(Number); return [lo, hi ?? lo]; };
const uniformInt = ([lo, hi]) => lo + Math.floor(random() * (hi - lo + 1));
const WORDS = 'the a little girl boy dog cat sun tree house ball big happy sad played ran saw went day park friend mom said'.split(' ');
const words = (n) => Array.from({ length: n }, () => WORDS[Math.floor(random() * WORDS.length)]).join(' ');
const percentile = (xs, p) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function modelId() {
  if (opt.model) return opt.model;
  const r = await fetch(`${opt.url}/v1/models`, { headers });
  return (await r.json()).data[0].id;
}

// Streams one completion; returns timings and the text, or marks it aborted/failed.
async function streamed(body, abortAfterChunks) {
  const ctl = new AbortController();
  const t0 = performance.now();
  const out = { ok: false, aborted: false, text: '', ttft: 0, tpot: 0, tokens: 0, error: null };
  try {
    const res = await fetch(`${opt.url}/v1/completions`, {
      method: 'POST', headers, signal: ctl.signal,
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    });
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
    let buf = '', chunks = 0, tFirst = 0, tLast = 0, done = false;
    const decoder = new TextDecoder();
    for await (const bytes of res.body) {
      buf += decoder.decode(bytes, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, i); buf = buf.slice(i + 2);
        if (!event.startsWith('data: ')) continue;
        const data = event.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        if (j.usage) out.tokens = j.usage.completion_tokens;
        for (const c of j.choices) {
          if (!c.text) continue;
          const now = performance.now();
          if (!tFirst) tFirst = now;
          tLast = now;
          out.text += c.text;
          if (++chunks === abortAfterChunks) { out.aborted = true; ctl.abort(); return out; }
        }
      }
    }
    if (!done) throw new Error('stream ended without [DONE]');
    out.ttft = tFirst - t0;
    out.tpot = out.tokens > 1 ? (tLast - tFirst) / (out.tokens - 1) : 0;
    out.ok = true;
  } catch (e) {
    if (out.aborted) return out;
    out.error = String(e.message ?? e);
  }
  return out;
}

async function whole(body) {
  const res = await fetch(`${opt.url}/v1/completions`, { method: 'POST', headers, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  return (await res.json()).choices[0].text;
}

function makeRequests(model, n) {
  const prefix = words(Number(opt['prefix-len']));
  return Array.from({ length: n }, () => {
    const shared = random() < Number(opt['shared-prefix']);
    const prompt = (shared ? prefix + ' ' : '') + words(uniformInt(range(opt['prompt-len'])));
    const maxTokens = uniformInt(range(opt['output-len']));
    const disconnect = random() < Number(opt.disconnect);
    return {
      body: { model, prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true },
      abortAfter: disconnect ? 1 + Math.floor(random() * Math.max(1, maxTokens / 2)) : 0,
    };
  });
}

// Poisson arrivals, at most `concurrency` requests in flight.
async function runLevel(reqs, concurrency, rate) {
  const results = [];
  let inFlight = 0, next = 0;
  const t0 = performance.now();
  let arrival = 0;
  await new Promise((resolveAll) => {
    const launch = async () => {
      while (next < reqs.length && inFlight < concurrency) {
        const r = reqs[next++];
        if (Number.isFinite(rate)) {
          arrival += -Math.log(1 - random()) / rate * 1000;
          const wait = t0 + arrival - performance.now();
          if (wait > 0) await sleep(wait);
        }
        inFlight++;
        streamed(r.body, r.abortAfter).then((res) => {
          results.push(res); inFlight--;
          if (results.length === reqs.length) resolveAll(); else launch();
        });
      }
    };
    launch();
  });
  const seconds = (performance.now() - t0) / 1000;
  return { results, seconds };
}

async function metrics() {
  const text = await (await fetch(`${opt.url}/metrics`, { headers })).text();
  const get = (name) => Number((text.match(new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm')) ?? [])[1]);
  return { used: get('tessera_kv_blocks{state="used"}'), free: get('tessera_kv_blocks{state="free"}'),
    total: get('tessera_kv_blocks_total'), hit: get('tessera_prefix_cache_hit_rate') };
}

// Aborted requests finish at the server's next write; give them a moment.
async function kvWhole() {
  let m;
  for (let i = 0; i < 100; i++) {
    m = await metrics();
    if (m.used === 0 && m.free === m.total) return { ok: true, ...m };
    await sleep(100);
  }
  return { ok: false, ...m };
}

function rssKiB() {
  if (!opt.pid) return null;
  const m = readFileSync(`/proc/${opt.pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m);
  return m ? Number(m[1]) : null;
}

function summarize(level, { results, seconds }) {
  const done = results.filter((r) => r.ok);
  const failed = results.filter((r) => !r.ok && !r.aborted);
  const tokens = done.reduce((s, r) => s + r.tokens, 0);
  const ttft = done.map((r) => r.ttft), tpot = done.filter((r) => r.tokens > 1).map((r) => r.tpot);
  const good = done.filter((r) => r.ttft <= Number(opt['slo-ttft-ms']) && r.tpot <= Number(opt['slo-tpot-ms'])).length;
  return {
    concurrency: level, requests: results.length, completed: done.length, aborted: results.filter((r) => r.aborted).length,
    failed: failed.length, first_error: failed[0]?.error ?? null,
    throughput_tok_s: tokens / seconds, goodput_req_s: good / seconds,
    ttft_ms_p50: percentile(ttft, 50), ttft_ms_p99: percentile(ttft, 99),
    tpot_ms_p50: percentile(tpot, 50), tpot_ms_p99: percentile(tpot, 99),
  };
}

async function consistencyCheck(model) {
  const body = { model, prompt: 'Once upon a time there was', max_tokens: 48, temperature: 0 };
  const [s, w] = await Promise.all([streamed(body, 0), whole(body)]);
  return s.ok && s.text === w;
}

const model = await modelId();
const levels = opt.concurrency.split(',').map(Number);
const rate = opt.rate === 'inf' ? Infinity : Number(opt.rate);
const report = { url: opt.url, model, rounds: [], checks: {} };
let ok = true;
report.checks.streamed_equals_whole = await consistencyCheck(model);
ok &&= report.checks.streamed_equals_whole;
for (let round = 1; round <= Number(opt.rounds); round++) {
  const levelsOut = [];
  for (const c of levels) {
    const s = summarize(c, await runLevel(makeRequests(model, Number(opt.requests)), c, rate));
    const kv = await kvWhole();
    s.kv_whole = kv.ok;
    s.prefix_hit_rate = kv.hit;
    ok &&= s.failed === 0 && kv.ok;
    log(`round ${round} c=${c}: ${s.completed} ok, ${s.aborted} aborted, ${s.failed} failed; ` +
        `${s.throughput_tok_s.toFixed(1)} tok/s, goodput ${s.goodput_req_s.toFixed(2)} req/s, ` +
        `TTFT p50/p99 ${s.ttft_ms_p50.toFixed(1)}/${s.ttft_ms_p99.toFixed(1)} ms, ` +
        `TPOT p50/p99 ${s.tpot_ms_p50.toFixed(2)}/${s.tpot_ms_p99.toFixed(2)} ms, KV whole: ${kv.ok}` +
        (s.first_error ? `; first error: ${s.first_error}` : ''));
    levelsOut.push(s);
  }
  const rss = rssKiB();
  if (rss !== null) log(`round ${round}: server RSS ${(rss / 1024).toFixed(1)} MiB`);
  report.rounds.push({ round, levels: levelsOut, rss_kib: rss });
}
const rss = report.rounds.map((r) => r.rss_kib).filter((x) => x !== null);
if (rss.length >= 2) {
  // Growth from round 2 on: round 1 includes allocator and thread-pool warm-up.
  report.checks.rss_growth_kib = rss[rss.length - 1] - rss[Math.min(1, rss.length - 1)];
}
report.checks.passed = ok;
log(ok ? 'all checks passed' : 'CHECKS FAILED');
if (opt.json) console.log(JSON.stringify(report));
process.exit(ok ? 0 : 1);
