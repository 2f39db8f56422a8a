// Measurements for the README (not a test: nothing here is asserted).
//   node tests/bench.mjs   (after `make web`; `make bench-web` does both)
// Prints and writes test-artifacts/bench-<policy>-<time limit>s.json:
//   - first render from localhost: first contentful paint and editor ready (ms), median of 5 cold loads;
//   - the wasm module's size, raw and gzipped (level 9);
//   - workload-6 under a policy (default pollux-mip) in the page's worker: wall time,
//     and the page's responsiveness meanwhile (longest gap of a 50 ms timer, and how long a real click takes end to end).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { loadavg } from 'node:os';
import { chromium } from 'playwright-core';
import { serve } from '../serve.mjs';

const WEB = new URL('..', import.meta.url).pathname;
const POLICY = process.argv[2] ?? 'pollux-mip';
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
  '--no-first-run', '--disable-component-update', '--disable-sync'];

const wasm = readFileSync(join(WEB, 'dist', 'gpuplan_wasm_bg.wasm'));
const out = { wasm_bytes: wasm.length, wasm_gzip_bytes: gzipSync(wasm, { level: 9 }).length };
const server = await serve(join(WEB, 'dist'), 0);
const url = `http://localhost:${server.address().port}/`;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });

const loads = [];
for (let i = 0; i < 5; i++) {
  const ctx = await browser.newContext(); // a fresh cache every time
  const page = await ctx.newPage();
  await page.goto(url);
  await page.waitForSelector('body[data-ready="1"]');
  loads.push(await page.evaluate(() => ({
    fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime,
    ready: performance.getEntriesByName('explorer-ready')[0].startTime,
  })));
  await ctx.close();
}
const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
out.first_contentful_paint_ms = Math.round(median(loads.map((l) => l.fcp)));
out.editor_ready_ms = Math.round(median(loads.map((l) => l.ready)));

const ctx = await browser.newContext();
const page = await ctx.newPage();
await page.goto(url);
await page.waitForSelector('body[data-ready="1"]');
await page.selectOption('[name=policy]', POLICY);
// BENCH_TIME_LIMIT sets the per-round solver limit (s); the default is the CLI's 10 s.
if (process.env.BENCH_TIME_LIMIT) await page.fill('[name=time_limit_s]', process.env.BENCH_TIME_LIMIT);
await page.evaluate(() => {
  window.__lag = 0;
  let last = performance.now();
  setInterval(() => {
    const t = performance.now();
    window.__lag = Math.max(window.__lag, t - last - 50);
    last = t;
  }, 50);
});
await page.click('#run');
// While it runs, time how long a click on the page takes to be handled.
// A cap (BENCH_MAX_S, default 900 s) so a slow planner still yields a number: how far it got.
const cap = Number(process.env.BENCH_MAX_S ?? 900) * 1000;
const started = Date.now();
let lastLog = 0;
const clicks = [];
while (!/^(Done|Failed|Cancelled)/.test(await page.textContent('#status'))) {
  if (Date.now() - lastLog > 30_000) {
    lastLog = Date.now();
    console.error(await page.textContent('#status'));
  }
  if (Date.now() - started > cap) {
    out.capped_at = await page.textContent('#status');
    await page.click('#cancel');
    await page.waitForFunction(() => document.querySelector('#status').textContent === 'Cancelled.');
    break;
  }
  await page.waitForTimeout(2000);
  const t0 = performance.now();
  await page.click('header h1'); // a real input event, answered by the page's thread
  clicks.push(performance.now() - t0);
}
out.policy = POLICY;
out.time_limit_s = Number(await page.inputValue('[name=time_limit_s]'));
// The machine is shared: the 1-minute load average says how contended the run was.
out.load_average_1m_at_end = loadavg()[0];
out.status = await page.textContent('#status');
out.max_timer_lag_ms = Math.round(await page.evaluate(() => window.__lag));
out.max_click_ms = Math.round(Math.max(0, ...clicks) * 10) / 10;
out.summary = await page.evaluate(() => document.querySelector('#summary')?.innerText);
await browser.close();
server.close();
mkdirSync(join(WEB, 'test-artifacts'), { recursive: true });
writeFileSync(join(WEB, 'test-artifacts', `bench-${POLICY}-${out.time_limit_s}s.json`), JSON.stringify(out, null, 2) + '\n');
console.log(JSON.stringify(out, null, 2));
