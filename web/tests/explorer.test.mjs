// Browser tests of the explorer: Debian's Chromium, headless, driven by
// playwright-core (never a downloaded browser). Run by `make test-web`,
// which builds web/dist and the native CLI first and passes its path in
// GPUPLAN_BIN. Screenshots and numbers go to web/test-artifacts/.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { serve } from '../serve.mjs';

const WEB = new URL('..', import.meta.url).pathname;
const ROOT = join(WEB, '..');
const ARTIFACTS = join(WEB, 'test-artifacts');
const BIN = process.env.GPUPLAN_BIN;
// Flags from DEVELOPERS.md: no network chatter, no GPU, no first-run UI.
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
  '--no-first-run', '--disable-component-update', '--disable-sync'];

let server;
let browser;
let url;
const metrics = {};

before(async () => {
  assert.ok(BIN, 'GPUPLAN_BIN must name the native gpuplan binary (make test-web sets it)');
  mkdirSync(ARTIFACTS, { recursive: true });
  server = await serve(join(WEB, 'dist'), 0);
  url = `http://localhost:${server.address().port}/`;
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });
});

after(async () => {
  await browser?.close();
  server?.close();
  writeFileSync(join(ARTIFACTS, 'metrics.json'), JSON.stringify(metrics, null, 2) + '\n');
});

async function openPage(hash = '', base = url) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, acceptDownloads: true });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(base + hash);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 30_000 });
  return { page, context, errors };
}

async function setField(page, index, name, value) {
  const el = page.locator('#scenarios .scenario').nth(index).locator(`[name=${name}]`);
  const tag = await el.evaluate((e) => e.tagName);
  if (tag === 'SELECT') await el.selectOption(value);
  else await el.fill(String(value));
}

async function runAndWait(page, timeout = 120_000) {
  await page.click('#run');
  await page.waitForFunction(() => /^(Done|Failed|Cancelled)/.test(document.querySelector('#status').textContent),
    null, { timeout });
  return page.textContent('#status');
}

async function exportedJson(page) {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-json')]);
  return JSON.parse(readFileSync(await download.path(), 'utf8'));
}

function nativeSummary(args) {
  const out = execFileSync(BIN, ['simulate', ...args, '--format', 'json'], { cwd: ROOT, encoding: 'utf8' });
  return JSON.parse(out);
}

test('the page renders and the engine loads', async () => {
  const { page, context, errors } = await openPage();
  const ready = await page.evaluate(() => performance.getEntriesByName('explorer-ready')[0].startTime);
  metrics.first_render_ms = Math.round(ready);
  assert.ok(await page.locator('#scenarios .scenario').count() === 1);
  const workloads = await page.locator('[name=workload] option').count();
  assert.ok(workloads >= 40, `${workloads} workload options`);
  await page.screenshot({ path: join(ARTIFACTS, 'start.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

// Runs workload-6 under `policy` in the page and checks every non-timing
// summary key against `gpuplan simulate --format json`; returns both.
async function workload6EqualsNative(policy, page) {
  const native = nativeSummary(['--workload', 'traces/pollux/workloads/workload-6.csv', '--policy', policy]);
  await setField(page, 0, 'policy', policy);
  const status = await runAndWait(page);
  assert.match(status, /^Done/);
  const [run] = await exportedJson(page);
  const web = run.summary;
  metrics[`${policy}_workload6`] = { web_wall_s: web.wall_s, native_wall_s: native.wall_s };
  writeFileSync(join(ARTIFACTS, `${policy}-workload-6.json`), JSON.stringify({ native, web }, null, 2) + '\n');
  for (const key of ['policy', 'workload', 'jobs', 'rounds', 'restarts', 'avg_jct_s', 'p50_jct_s', 'p99_jct_s',
    'imagenet_mean_jct_s', 'makespan_s', 'gpu_utilization']) {
    assert.equal(web[key], native[key], `summary.${key}: browser ${web[key]} vs native ${native[key]}`);
  }
  return native;
}

test('workload-6 under tiresias equals the native CLI', async () => {
  const { page, context, errors } = await openPage();
  const native = await workload6EqualsNative('tiresias', page);
  const shown = await page.textContent('#summary td[data-key=avg_jct_s]');
  assert.ok(shown.startsWith((native.avg_jct_s / 3600).toFixed(3)), shown);
  await page.screenshot({ path: join(ARTIFACTS, 'tiresias-workload-6.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

// greedy plans with the fitted goodput models: the fits' exp/ln/pow and the
// planner's arithmetic must give the CLI's numbers bit for bit in wasm too.
test('workload-6 under greedy (fitted goodput models) equals the native CLI', async () => {
  const { page, context, errors } = await openPage();
  await workload6EqualsNative('greedy', page);
  assert.deepEqual(errors, []);
  await context.close();
});

test('two scenarios side by side, shared through the URL, and the round inspector', async () => {
  const { page, context, errors } = await openPage();
  await setField(page, 0, 'workload', 'workloads-0.5/workload-1');
  await page.click('#add-scenario');
  await setField(page, 1, 'policy', 'fifo');
  await setField(page, 1, 'cluster', '8x4');
  // The what-if view marks the fields that differ from the first scenario.
  assert.equal(await page.locator('.scenario:nth-child(2) .changed').count(), 2);
  const status = await runAndWait(page);
  assert.match(status, /^Done/);
  const runs = await exportedJson(page);
  assert.deepEqual(runs.map((r) => r.summary.policy), ['tiresias', 'fifo']);
  assert.deepEqual(runs.map((r) => r.total_gpus), [64, 32]);
  // Both on the same axes: each chart's legend lists both scenarios.
  for (const chart of ['#chart-cdf', '#chart-util', '#chart-planner']) {
    assert.equal(await page.locator(`${chart} .u-legend .u-series`).count(), 3, chart);
  }
  // The difference is highlighted against the first scenario.
  assert.ok(await page.locator('#summary td.better, #summary td.worse').count() > 0);
  await page.screenshot({ path: join(ARTIFACTS, 'comparison.png'), fullPage: true });

  // Round inspector: pick round 5 of scenario B.
  await page.selectOption('#inspect-run', '1');
  await page.fill('#inspect-index', '5');
  await page.dispatchEvent('#inspect-index', 'change');
  await page.waitForFunction(() => document.querySelector('#inspect-head b')?.textContent === '5');
  assert.match(await page.textContent('#inspect-head'), /planner fifo/);
  const objective = Number(await page.textContent('#inspect-head .objective'));
  assert.ok(objective > 0, `objective ${objective}`);
  assert.ok(await page.locator('#inspect-jobs tr').count() > 1);
  assert.ok((await page.textContent('#inspect-jobs')).includes('1:'), 'speedup tables shown');
  // The same round solved again by the MIP (microlp in the browser).
  await page.selectOption('#resolve-planner', 'pollux-mip');
  await page.click('#resolve');
  await page.waitForSelector('#resolve-out .resolved-objective', { timeout: 60_000 });
  assert.ok(Number(await page.textContent('#resolve-out .resolved-objective')) > 0);
  await page.locator('#inspector').screenshot({ path: join(ARTIFACTS, 'round-inspector.png') });

  // The URL carries both scenarios.
  const shared = new URL(page.url()).hash;
  const again = await openPage(shared);
  assert.equal(await again.page.locator('#scenarios .scenario').count(), 2);
  assert.equal(await again.page.locator('.scenario').nth(1).locator('[name=cluster]').inputValue(), '8x4');
  await again.context.close();

  // CSV export carries both scenarios' jobs.
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#export-jobs-csv')]);
  const lines = readFileSync(await dl.path(), 'utf8').trim().split('\n');
  assert.equal(lines.length, 1 + runs[0].jobs.length + runs[1].jobs.length);
  assert.deepEqual(errors, []);
  await context.close();
});

test('a malformed uploaded workload shows the CLI message and the page keeps working', async () => {
  const bad = 'name,time,application,num_replicas,batch_size\n' +
    'ok-0,0,cifar10,2,128\nbad-1,-5,cifar10,2,128\nbad-2,10,resnet,1,64\nbad-3,20,bert,zero,12\n';
  const dir = mkdtempSync(join(tmpdir(), 'gpuplan-web-'));
  writeFileSync(join(dir, 'bad-workload.csv'), bad);
  const cli = spawnSync(BIN, ['simulate', '--workload', 'bad-workload.csv', '--policy', 'tiresias'],
    { cwd: dir, encoding: 'utf8' });
  rmSync(dir, { recursive: true });
  assert.equal(cli.status, 2);
  const expected = cli.stderr.trim().replace(/^error: /, '');
  assert.match(expected, /bad-workload\.csv:3:time/);

  const { page, context, errors } = await openPage();
  await page.setInputFiles('[name=upload]', { name: 'bad-workload.csv', mimeType: 'text/csv', buffer: Buffer.from(bad) });
  // The page reads the file asynchronously, then selects it.
  await page.waitForFunction(() => document.querySelector('[name=workload]').value === 'upload');
  assert.equal(await page.inputValue('[name=workload]'), 'upload');
  assert.match(await runAndWait(page), /^Failed/);
  assert.equal((await page.textContent('#error')).trim(), expected);
  await page.screenshot({ path: join(ARTIFACTS, 'bad-upload.png'), fullPage: true });
  // Still working: a bundled workload runs afterwards.
  await setField(page, 0, 'workload', 'workloads-0.5/workload-2');
  await setField(page, 0, 'policy', 'fifo');
  assert.match(await runAndWait(page), /^Done/);
  assert.equal(await page.isHidden('#error'), true);
  assert.deepEqual(errors, []);
  await context.close();
});

async function cancelTest(base, isolated) {
  const { page, context, errors } = await openPage('', base);
  assert.equal(await page.evaluate(() => globalThis.crossOriginIsolated), isolated);
  await setField(page, 0, 'policy', 'pollux-mip');
  await page.click('#run');
  await page.waitForFunction(() => document.querySelector('#progress').value > 0, null, { timeout: 60_000 });
  await page.click('#cancel');
  await page.waitForFunction(() => document.querySelector('#status').textContent === 'Cancelled.', null, { timeout: 60_000 });
  await setField(page, 0, 'workload', 'workloads-0.5/workload-3');
  await setField(page, 0, 'policy', 'fifo');
  assert.match(await runAndWait(page), /^Done/);
  assert.deepEqual(errors, []);
  await context.close();
}

test('Cancel stops a long run and the page stays usable (shared-memory flag)', () => cancelTest(url, true));

test('Cancel without cross-origin isolation restarts the worker', async () => {
  const plain = await serve(join(WEB, 'dist'), 0, { isolate: false });
  try {
    await cancelTest(`http://localhost:${plain.address().port}/`, false);
  } finally {
    plain.close();
  }
});
