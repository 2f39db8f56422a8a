// The explorer page: scenario editor, results, comparison, round inspector.
// All simulation happens in worker.js; this thread only draws.
import uPlot from 'uplot';

const $ = (sel) => document.querySelector(sel);
const COLORS = ['#1f6feb', '#d1242f', '#1a7f37', '#8250df', '#bf8700', '#0a7ea4', '#cf222e', '#57606a'];
const HOUR = 3600;

const state = {
  catalog: null,
  worker: null,
  nextId: 1,
  running: null, // {id, cancel: Int32Array|null, resolve, reject}
  pending: new Map(), // inspect requests by id
  runs: [], // results of the last Run, one per scenario
  charts: [],
};

// ---------- the worker ----------

function startWorker() {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL('worker.js', import.meta.url), { type: 'module' });
    w.onmessage = (ev) => {
      const m = ev.data;
      if (m.type === 'ready') {
        resolve(m.catalog);
        return;
      }
      if (m.type === 'error' && m.id === null) {
        reject(new Error(m.message));
        return;
      }
      onWorkerMessage(m);
    };
    let started = false;
    w.onerror = (e) => {
      if (!started) reject(new Error(e.message || 'worker failed to start'));
      else engineCrashed(e.message || 'the engine stopped');
    };
    const ready = resolve;
    resolve = (cat) => {
      started = true;
      ready(cat);
    };
    state.worker = w;
  });
}

/// A trapped wasm instance keeps its broken state (held borrows, a lost
/// stack pointer), so every later call would fail too: throw the worker
/// away, start a fresh one, and fail only what was in flight.
function engineCrashed(message) {
  state.worker.terminate();
  const err = new Error(`The engine crashed (${message}) and was restarted; the next run starts afresh.`);
  const r = state.running;
  state.running = null;
  for (const p of state.pending.values()) p.reject(err);
  state.pending.clear();
  state.restarting = startWorker().finally(() => { state.restarting = null; });
  r?.reject(err);
}

function onWorkerMessage(m) {
  if (m.type === 'error' && m.fatal) {
    engineCrashed(m.message);
    return;
  }
  const r = state.running;
  if (m.type === 'progress' && r && m.id === r.id) {
    r.onProgress(m);
  } else if (m.type === 'done' && r && m.id === r.id) {
    state.running = null;
    r.resolve({ result: JSON.parse(m.result), elapsed_ms: m.elapsed_ms });
  } else if (m.type === 'error' && r && m.id === r.id) {
    state.running = null;
    r.reject(new Error(m.message));
  } else if (m.type === 'inspected' || m.type === 'error') {
    const p = state.pending.get(m.id);
    if (!p) return;
    state.pending.delete(m.id);
    if (m.type === 'inspected') p.resolve(m.round);
    else p.reject(new Error(m.message));
  }
}

async function runInWorker(scenario, onProgress) {
  if (state.restarting) await state.restarting;
  return new Promise((resolve, reject) => {
    const id = state.nextId++;
    const sab = globalThis.crossOriginIsolated ? new SharedArrayBuffer(4) : null;
    state.running = { id, cancel: sab ? new Int32Array(sab) : null, resolve, reject, onProgress };
    state.worker.postMessage({ type: 'run', id, scenario, cancel: sab });
  });
}

async function inspectInWorker(runId, index, options = null) {
  if (state.restarting) await state.restarting;
  return new Promise((resolve, reject) => {
    const id = state.nextId++;
    state.pending.set(id, { resolve, reject });
    const type = options ? 'resolve' : 'inspect';
    state.worker.postMessage({ type, id, runId, index, options });
  });
}

async function cancelRun() {
  const r = state.running;
  if (!r) return;
  if (r.cancel) {
    Atomics.store(r.cancel, 0, 1); // the worker stops after the current round
    return;
  }
  // No shared memory here: stop the worker outright and start a fresh one.
  state.running = null;
  state.worker.terminate();
  r.reject(new Error('cancelled'));
  await startWorker();
}

// ---------- scenario editor and the URL ----------

/// One line for each field, shown where the field is (its tooltip) and in
/// the help box, so no field needs the source to be understood.
const FIELD_HELP = {
  cluster: 'Nodes × GPUs per node, e.g. 16x4; groups of other types joined by +, e.g. 12x4:t4+4x8:a100.',
  workload: 'Jobs and their arrival times. "Pollux load 0.5/1.5/2.0" are the Pollux artifact\'s job sets drawn at those arrival rates (a different set of jobs each).',
  load: 'Load ×: divides every submit time of the chosen workload by this (2 = the same jobs arriving twice as fast). Not the same as the "Pollux load" sets, which are other jobs.',
  policy: 'The planner that decides every round which job gets how many GPUs on which nodes.',
  p: 'Pollux\'s fairness knob: the power of the generalized mean of speedups that goodput planners maximise (-1 = harmonic mean, fairer; 1 = arithmetic mean, more throughput).',
  restart_delay_s: 'Seconds a job loses each time its GPUs change (checkpoint and restart).',
  interval_s: 'Seconds between planning rounds.',
  interference: 'avoid: no two distributed jobs share a node; allow: they may, and run slower by the slowdown below.',
  interference_slowdown: 'Fraction of speed a distributed job loses on a shared node (0 = none), when interference is allowed.',
  time_limit_s: 'Most seconds a MIP planner may solve one round; on time-out it returns its best plan so far (or falls back, saying why).',
  seed: 'Seeds the planners\' and the simulator\'s randomness (e.g. pollux-ga\'s search); a whole number >= 0. Same seed, same result.',
  variability: 'GPUs of one model differ in speed (PAL, SC\'24): slowdowns measured per GPU on TACC Longhorn (V100), Frontera (RTX 5000) or Lonestar6 (A100), drawn per node by the seed. A job runs at its slowest GPU\'s pace. none = every GPU at median speed.',
  cross_node_factor: 'With variability: how many times slower a rigid (trace) job runs when it spans nodes (PAL\'s L, 1.7 by default).',
  placement: 'How fixed-size policies (fifo, srtf, optimus, tiresias, tiresias-gittins) pick GPUs, as gpuplan simulate --placement: default = the policy\'s own (running jobs kept); packed = fewest nodes; random; pm-first = fastest GPUs for the job\'s class; pal = PAL\'s least expected slowdown; mip = PAL\'s cost minimised over all jobs of the round at once (pm-first, pal and mip need GPU variability). Other policies place jobs themselves.',
  sticky: 'With a placement: running jobs keep their GPUs instead of being placed afresh every round (--sticky).',
  type_blind: 'Goodput planners value every GPU type with the job\'s one model, as Pollux does (--type-blind); jobs still run at their true per-type speed. Compare pollux-ga blind with sia on a mixed cluster such as 6x4:t4+3x8:rtx2080ti+2x8:a100.',
  variability_blind: 'With GPU variability: planners do not see per-GPU speeds (--variability-blind), while the simulator still charges them; compare with the aware run to see what seeing variability is worth.',
  sharing: 'Most jobs one GPU may hold (--sharing K; 1 = none). mip-exact, mip-aggregate, pollux-mip and pollux-mip-aggregate decide who shares; shared jobs run slower by Gavel\'s fitted co-location curve. The round inspector lists who shares with whom.',
};

/// One line for each policy.
const POLICY_HELP = {
  fifo: 'First in, first out: jobs get the GPUs they asked for, in arrival order.',
  srtf: 'Shortest remaining time first (knows each job\'s remaining work: an oracle).',
  optimus: 'Optimus + oracle: GPUs go where they cut remaining time most.',
  tiresias: 'Tiresias 2D-LAS: least attained GPU-time first, no job-length knowledge.',
  'tiresias-gittins': 'Tiresias 2D-Gittins: Gittins index over attained service.',
  'pollux-ga': 'Pollux as published: a genetic search for the allocation of highest goodput.',
  greedy: 'Goodput, greedily: repeatedly gives a GPU to the job that gains most.',
  'mip-exact': 'Goodput, exactly: a MIP over every job × node; in the browser solved by microlp (same as mip-exact-microlp).',
  'mip-aggregate': 'Goodput MIP over node shapes rather than single nodes (smaller, faster); microlp in the browser (same as mip-aggregate-microlp).',
  'mip-exact-microlp': 'mip-exact with the microlp solver (in the browser, mip-exact is this too).',
  'mip-aggregate-microlp': 'mip-aggregate with the microlp solver (in the browser, mip-aggregate is this too).',
  'mip-node': 'The plain node-level goodput MIP, kept as a cross-check.',
  'pollux-mip': 'Goodput MIP: exact up to 400 jobs × 128 nodes, aggregate above.',
  'pollux-mip-aggregate': 'Goodput MIP over node shapes at every size.',
};

const GOODPUT_NOTE = 'value: the job\'s term in the objective, its speedup over the fair share (× a restart penalty if it moves); ' +
  'objective: their generalized mean with power p. Only goodput planners (greedy, pollux-*, mip-*) maximise it; ' +
  'the others (fifo, tiresias, ...) allocate by other rules, so their objective can sit near 0.';

const FIELDS = ['label', 'cluster', 'workload', 'load', 'policy', 'p', 'restart_delay_s', 'interval_s',
  'interference', 'interference_slowdown', 'time_limit_s', 'seed', 'variability', 'cross_node_factor', 'placement',
  'sticky', 'sharing', 'type_blind', 'variability_blind'];
const FIELD_NAMES = { cluster: 'cluster', workload: 'workload', load: 'load ×', policy: 'policy', p: 'p',
  restart_delay_s: 'restart delay', interval_s: 'interval', interference: 'interference',
  interference_slowdown: 'slowdown', time_limit_s: 'time limit', seed: 'seed', variability: 'variability',
  cross_node_factor: 'cross-node L', placement: 'placement', sticky: 'sticky', sharing: 'jobs per GPU',
  type_blind: 'type-blind', variability_blind: 'variability-blind' };
const BOOLEAN = new Set(['sticky', 'type_blind', 'variability_blind']);
const NUMERIC = new Set(['load', 'p', 'restart_delay_s', 'interval_s', 'interference_slowdown', 'time_limit_s', 'seed',
  'cross_node_factor', 'sharing']);

function scenarioElements() {
  return [...document.querySelectorAll('#scenarios .scenario')];
}

function addScenario(values) {
  const node = $('#scenario-template').content.firstElementChild.cloneNode(true);
  const wl = node.querySelector('[name=workload]');
  for (const w of state.catalog.workloads) wl.add(new Option(`${w.label} (${w.jobs} jobs)`, w.id));
  wl.add(new Option('Uploaded file', 'upload'));
  const pol = node.querySelector('[name=policy]');
  for (const p of state.catalog.policies) {
    const o = new Option(p, p);
    o.title = POLICY_HELP[p] ?? '';
    pol.add(o);
  }
  for (const [f, text] of Object.entries(FIELD_HELP)) node.querySelector(`[name=${f}]`).closest('label').title = text;
  const help = node.querySelector('.policy-help');
  const place = node.querySelector('[name=placement]');
  for (const p of state.catalog.placements) place.add(new Option(p === 'default' ? 'default (the policy\'s own)' : p, p));
  const sticky = node.querySelector('[name=sticky]');
  // Only fixed-size policies place through the stage: for the others the
  // controls are off (and read as default), as the CLI refuses --placement.
  const showPolicy = () => {
    const takes = state.catalog.placement_policies.includes(pol.value);
    place.disabled = !takes;
    sticky.disabled = !takes;
    help.textContent = `${pol.value}: ${POLICY_HELP[pol.value] ?? ''}` +
      (takes ? '' : ` (places jobs itself: no placement stage, which only ${state.catalog.placement_policies.join(', ')} take)`);
  };
  pol.addEventListener('change', showPolicy);
  // sharing: absent from the defaults and from links made before it (1 = none).
  const s = { sharing: 1, ...state.catalog.defaults, ...values };
  if (!s.label) s.label = freshLabel();
  for (const f of FIELDS) {
    const el = node.querySelector(`[name=${f}]`);
    if (BOOLEAN.has(f)) el.checked = Boolean(s[f]);
    else el.value = s[f];
  }
  showPolicy();
  node.upload = null;
  node.querySelector('[name=upload]').addEventListener('change', async (ev) => {
    const file = ev.target.files[0];
    if (!file) return;
    node.upload = { name: file.name, text: await file.text() };
    wl.value = 'upload';
    onEdit();
  });
  node.querySelector('.remove').addEventListener('click', () => {
    if (scenarioElements().length > 1) node.remove();
    onEdit();
  });
  node.addEventListener('input', onEdit);
  $('#scenarios').append(node);
  onEdit();
}

/// The first of A, B, ..., Z, A2, ... that no scenario uses (removing B of
/// A, B, C used to give a second C).
function freshLabel() {
  const used = new Set(scenarioElements().map((el) => el.querySelector('[name=label]').value));
  for (let n = 1; ; n++) {
    for (let c = 0; c < 26; c++) {
      const l = String.fromCharCode(65 + c) + (n > 1 ? n : '');
      if (!used.has(l)) return l;
    }
  }
}

function readScenario(node) {
  const s = {};
  for (const f of FIELDS) {
    const el = node.querySelector(`[name=${f}]`);
    s[f] = BOOLEAN.has(f) ? el.checked : NUMERIC.has(f) ? Number(el.value) : el.value;
  }
  // A policy without the placement stage: the controls are off, read as default.
  if (node.querySelector('[name=placement]').disabled) {
    s.placement = 'default';
    s.sticky = false;
  }
  if (s.workload === 'upload' && node.upload) s.upload = node.upload;
  return s;
}

function scenarios() {
  return scenarioElements().map(readScenario);
}

function encodeState() {
  // Uploaded files stay out of links: they may be large and private.
  const list = scenarios().map(({ upload, ...rest }) => rest);
  return '#s=' + encodeURIComponent(JSON.stringify(list));
}

/// Scenarios from the share link; a link that cannot be read says so
/// (it used to fall back to the defaults silently).
function decodeState() {
  if (!location.hash) return null;
  const m = location.hash.match(/^#s=(.*)$/);
  const broken = (why) => {
    showError(`This share link could not be read (${why}); showing the default scenario instead.`);
    return null;
  };
  if (!m) return broken('it does not start with #s=');
  let list;
  try {
    list = JSON.parse(decodeURIComponent(m[1]));
  } catch (e) {
    return broken(e.message);
  }
  if (!Array.isArray(list) || !list.length || !list.every((x) => x && typeof x === 'object')) {
    return broken('it holds no list of scenarios');
  }
  const known = new Set(FIELDS);
  const unknown = list.flatMap((x) => Object.keys(x)).filter((k) => !known.has(k));
  if (unknown.length) return broken(`unknown field ${unknown[0]}`);
  return list;
}

function onEdit() {
  history.replaceState(null, '', encodeState());
  // What-if view: mark each field that differs from the first scenario.
  const els = scenarioElements();
  const base = els.length ? readScenario(els[0]) : {};
  for (const el of els.slice(1)) {
    const s = readScenario(el);
    for (const f of FIELDS) {
      if (f === 'label') continue;
      el.querySelector(`[name=${f}]`).classList.toggle('changed', s[f] !== base[f]);
    }
  }
}

// ---------- running ----------

function setStatus(text) {
  $('#status').textContent = text;
}

function showError(text) {
  const e = $('#error');
  e.textContent = text;
  e.hidden = !text;
}

/// A scenario's own checks, before the engine sees it: messages the engine
/// would give as a JSON parser error (a negative seed is not a u64).
function precheck(s) {
  if (!Number.isInteger(s.seed) || s.seed < 0) return `seed must be a whole number >= 0, got ${s.seed}`;
  return null;
}

/// Runs every scenario in turn. One that fails is named and skipped; the
/// others' results are kept, and so are those finished before a Cancel.
async function runAll() {
  showError('');
  const list = scenarios();
  $('#run').disabled = true;
  $('#sweep-run').disabled = true;
  $('#cancel').disabled = false;
  const runs = [];
  const failed = [];
  let cancelled = false;
  for (let i = 0; i < list.length && !cancelled; i++) {
    const s = list[i];
    const label = s.label || `#${i + 1}`;
    setStatus(`Running ${label} (${i + 1}/${list.length})…`);
    $('#progress').value = i / list.length;
    try {
      const bad = precheck(s);
      if (bad) throw new Error(bad);
      const { result, elapsed_ms } = await runInWorker(s, (p) => {
        $('#progress').value = (i + p.done / Math.max(1, p.total)) / list.length;
        setStatus(p.alone
          ? `Running ${label}: finish-time fairness, each job alone: ${p.done}/${p.total}, ${(p.elapsed_ms / 1000).toFixed(1)} s`
          : `Running ${label}: round ${p.round}, t = ${(p.now_s / HOUR).toFixed(1)} h, ` +
            `${p.done}/${p.total} jobs done, ${(p.elapsed_ms / 1000).toFixed(1)} s`);
      });
      result.elapsed_ms = elapsed_ms;
      runs.push(result);
    } catch (e) {
      if (e.message === 'cancelled') cancelled = true;
      else failed.push(`Scenario ${label}: ${e.message}`);
    }
  }
  $('#progress').value = runs.length ? 1 : 0;
  const kept = runs.map((r) => `${r.scenario.label} in ${(r.elapsed_ms / 1000).toFixed(1)} s`).join(', ');
  if (cancelled) setStatus(runs.length ? `Cancelled; kept ${kept}.` : 'Cancelled.');
  else if (!runs.length) setStatus('Failed.');
  else setStatus(`Done: ${kept}${failed.length ? `; ${failed.length} failed (see below)` : ''}`);
  showError(failed.join('\n'));
  if (runs.length) {
    state.runs = runs;
    renderResults();
    saveResults();
  }
  $('#run').disabled = false;
  $('#sweep-run').disabled = false;
  $('#cancel').disabled = true;
}

// ---------- results ----------

const hours = (v) => (v == null ? null : v / HOUR);
const RHO_HELP = 'Finish-time fairness (Themis): ρ = a job\'s JCT here / its JCT alone. ';

/// Summary rows: [key, name, value of a run, lower is better (null: neither), tooltip].
const METRICS = [
  ['avg_jct_s', 'avg JCT (h)', (r) => hours(r.summary.avg_jct_s), true],
  ['p50_jct_s', 'p50 JCT (h)', (r) => hours(r.summary.p50_jct_s), true],
  ['p99_jct_s', 'p99 JCT (h)', (r) => hours(r.summary.p99_jct_s), true],
  ['imagenet_mean_jct_s', 'imagenet mean JCT (h)', (r) => hours(r.summary.imagenet_mean_jct_s), true],
  ['makespan_s', 'makespan (h)', (r) => hours(r.summary.makespan_s), true],
  ['gpu_utilization', 'GPU allocation', (r) => r.summary.gpu_utilization, false],
  ['restarts', 'restarts', (r) => r.summary.restarts, true],
  ['rounds', 'rounds', (r) => r.summary.rounds, null],
  ['planner_ms', 'planner ms (mean)', (r) => r.summary.planner_ms.mean, true],
  ['planner_ms_p99', 'planner ms (p99)', (r) => r.summary.planner_ms.p99, true],
  ['queueing_mean', 'queueing delay mean (h)', (r) => hours(r.analysis?.queueing_delay_s.mean), true,
    'start − submit: from a job\'s arrival to the first round it holds GPUs (rounds come every interval)'],
  ['queueing_p50', 'queueing delay p50 (h)', (r) => hours(r.analysis?.queueing_delay_s.p50), true],
  ['queueing_p99', 'queueing delay p99 (h)', (r) => hours(r.analysis?.queueing_delay_s.p99), true],
  ['rho_mean', 'fairness ρ mean', (r) => r.analysis?.fairness?.rho.mean, true],
  ['rho_max', 'fairness ρ max', (r) => r.analysis?.fairness?.rho.max, true],
  ['rho_unfair', 'jobs with ρ > 1', (r) => r.analysis?.fairness?.unfair_jobs, true],
];

function fmt(v) {
  if (v == null || Number.isNaN(v)) return '–';
  return Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v * 100) / 100) : v.toFixed(3);
}

function renderSummary() {
  const t = $('#summary');
  const runs = state.runs;
  // Each what-if column names what it changes against the first scenario.
  const differs = (r) => FIELDS.filter((f) => f !== 'label' && r.scenario[f] !== runs[0].scenario[f])
    .map((f) => `${FIELD_NAMES[f]} ${r.scenario[f]}`);
  const head = `<tr><th>metric</th>${runs.map((r, i) => {
    const what = i === 0 ? 'baseline' : (differs(r).join(', ') || 'same settings');
    return `<th style="color:${COLORS[i % COLORS.length]}">${esc(r.scenario.label)}: <span class="differs">${esc(what)}</span>` +
      `<br><small>${esc(r.summary.policy)} · ${esc(r.summary.workload)} · ${r.total_gpus} GPUs</small></th>`;
  }).join('')}</tr>`;
  const rows = METRICS.map(([key, name, get, lowerBetter, help]) => {
    const base = get(runs[0]);
    const cells = runs.map((r, i) => {
      const v = get(r);
      let cls = '';
      let delta = '';
      if (i > 0 && v != null && base != null && base !== 0 && lowerBetter !== null) {
        const d = (v - base) / Math.abs(base);
        delta = `<span class="delta">${d >= 0 ? '+' : ''}${(d * 100).toFixed(1)}% vs ${esc(runs[0].scenario.label)}</span>`;
        if (Math.abs(d) > 1e-9) cls = (d < 0) === lowerBetter ? 'better' : 'worse';
      }
      return `<td class="${cls}" data-key="${key}">${fmt(v)}${delta}</td>`;
    });
    const title = key.startsWith('rho') ? RHO_HELP + (runs[0].analysis?.fairness?.isolated ?? '') : help;
    return `<tr><th${title ? ` title="${esc(title)}"` : ''}>${name}</th>${cells.join('')}</tr>`;
  });
  t.innerHTML = head + rows.join('');
  const f = runs[0].analysis?.fairness;
  $('#fairness-note').textContent = f ? `${RHO_HELP}Here "alone" is the ${f.isolated}. ` +
    'ρ > 1: the job finished later than it would have alone; ρ < 1: sooner (an adaptive policy gave it more GPUs than it asked for).' : '';
  renderPerApp();
}

/// JCT per application (the workload's app column), one column group per scenario.
function renderPerApp() {
  const runs = state.runs;
  const apps = [...new Set(runs.flatMap((r) => (r.analysis?.per_app ?? []).map((a) => a.app)))].sort();
  const head = '<tr><th>application</th>' + runs.map((r, i) =>
    `<th colspan="3" style="color:${COLORS[i % COLORS.length]}">${esc(r.scenario.label)}: ${esc(r.summary.policy)}</th>`).join('') + '</tr>' +
    '<tr><th></th>' + runs.map(() => '<th>jobs</th><th>mean JCT (h)</th><th>p99 JCT (h)</th>').join('') + '</tr>';
  const rows = apps.map((app) => `<tr><td>${esc(app)}</td>` + runs.map((r) => {
    const a = r.analysis?.per_app.find((x) => x.app === app);
    return a ? `<td>${a.jobs}</td><td data-app="${esc(app)}" data-stat="mean">${fmt(a.jct_s.mean / HOUR)}</td><td>${fmt(a.jct_s.p99 / HOUR)}</td>`
      : '<td>0</td><td>–</td><td>–</td>';
  }).join('') + '</tr>');
  $('#per-app').innerHTML = head + rows.join('');
}

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
}

function chartWidth(el) {
  return Math.max(480, el.clientWidth - 12);
}

/// Drag across a chart to zoom its time axis; a move under 5 px is a click,
/// which uPlot would otherwise swallow.
const CURSOR = { drag: { x: true, y: false, dist: 5, click: () => {} } };

function mkChart(el, opts, data) {
  el.innerHTML = '';
  const c = new uPlot({ width: chartWidth(el), height: 260, cursor: CURSOR, ...opts }, data, el);
  state.charts.push(c);
  el.uplot = c;
  return c;
}

/// Back to the whole time axis after a drag-zoom (double-click does it too).
function resetZoom(name) {
  const u = document.querySelector(`#chart-${name}`).uplot;
  const xs = u?.data[0].filter((x) => x != null);
  if (xs?.length) u.setScale('x', { min: xs[0], max: xs[xs.length - 1] });
}

/// Series on a shared x axis: the union of every run's x values, null where a run has none.
function aligned(perRun) {
  const xs = [...new Set(perRun.flatMap((pts) => pts.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const ys = perRun.map((pts) => {
    const y = new Array(xs.length).fill(null);
    for (const [x, v] of pts) y[index.get(x)] = v;
    return y;
  });
  return [xs, ...ys];
}

/// The value series `si` holds at index `idx`: the last one at or before it.
/// Every run has its own x values on the shared axis, so at most indices a
/// run has none; its curve (a step, a held allocation) still has a value.
function held(data, idx) {
  if (idx == null) return null;
  for (let k = idx; k >= 0; k--) if (data[k] != null) return data[k];
  return null;
}

function runSeries(extra = {}) {
  return state.runs.map((r, i) => ({
    label: r.scenario.label,
    stroke: COLORS[i % COLORS.length],
    width: 1.5,
    spanGaps: true,
    value: (u, v, si, idx) => fmt(held(u.data[si], idx)),
    ...extra,
  }));
}

/// A tooltip that follows the cursor; `text(u, left, top)` gives its HTML
/// (or null to hide it).
function tooltipPlugin(text) {
  let tip;
  return {
    hooks: {
      init: (u) => {
        tip = document.createElement('div');
        tip.className = 'chart-tip';
        tip.hidden = true;
        u.over.append(tip);
      },
      setCursor: (u) => {
        const { left, top } = u.cursor;
        const html = left == null || left < 0 ? null : text(u, left, top);
        if (!html) {
          tip.hidden = true;
          return;
        }
        tip.innerHTML = html;
        tip.hidden = false;
        const w = tip.offsetWidth;
        tip.style.left = `${left + 14 + w > u.over.clientWidth ? Math.max(0, left - w - 14) : left + 14}px`;
        tip.style.top = `${Math.max(0, top - tip.offsetHeight - 10)}px`;
      },
    },
  };
}

/// Clicking a point of a per-round chart opens that round in the round
/// inspector: the run whose curve is nearest the click, its round nearest
/// in time. A drag (zoom) is not a click.
function roundClickPlugin() {
  return {
    hooks: {
      init: (u) => {
        let down = null;
        u.over.addEventListener('mousedown', (e) => { down = [e.clientX, e.clientY]; });
        u.over.addEventListener('click', (e) => {
          if (!down || Math.hypot(e.clientX - down[0], e.clientY - down[1]) > 3) return;
          const { left, top, idx } = u.cursor;
          if (idx == null || left < 0) return;
          let best = -1;
          let bestDy = Infinity;
          state.runs.forEach((_, i) => {
            const v = held(u.data[i + 1], idx);
            if (v == null) return;
            const dy = Math.abs(u.valToPos(v, 'y') - top);
            if (dy < bestDy) [best, bestDy] = [i, dy];
          });
          if (best < 0) return;
          // The data point the cursor snapped to; a pixel spans several
          // rounds of a long run (zoom in to pick each).
          const t = u.data[0][idx] * HOUR;
          const rounds = state.runs[best].rounds;
          let k = 0;
          rounds.forEach((x, j) => { if (Math.abs(x.time_s - t) < Math.abs(rounds[k].time_s - t)) k = j; });
          openRound(best, k);
        });
      },
    },
  };
}

function openRound(run, index) {
  $('#inspect-run').value = String(run);
  $('#inspect-index').value = String(index);
  inspect();
  $('#inspector').scrollIntoView({ block: 'start' });
}

/// Tooltip of a chart with one series per run: x at the cursor, then each
/// run's value there (held, as in the legend).
function seriesTip(xName, yName) {
  return tooltipPlugin((u) => {
    const idx = u.cursor.idx;
    if (idx == null) return null;
    const rows = state.runs.map((r, i) => {
      const v = held(u.data[i + 1], idx);
      return `<div><span class="swatch" style="background:${COLORS[i % COLORS.length]}"></span>` +
        `${esc(r.scenario.label)}: ${v == null ? '–' : fmt(v)}</div>`;
    });
    const click = xName === 't =' ? '<small class="hint">click: open this round in the inspector</small>' : '';
    return `<b>${xName} ${fmt(u.data[0][idx])}</b> <small>${yName}</small>${rows.join('')}${click}`;
  });
}

function renderCharts() {
  for (const c of state.charts) c.destroy();
  state.charts = [];
  // JCT CDF: a step function per run, on the union of all JCTs.
  const cdf = state.runs.map((r) => {
    const j = r.jobs.map((x) => x.jct_s / HOUR).sort((a, b) => a - b);
    return j.map((x, k) => [x, (k + 1) / j.length]);
  });
  // JCTs span minutes to days: a log axis shows both ends.
  const log = $('#cdf-log').checked;
  mkChart($('#chart-cdf'), {
    scales: { x: log ? { time: false, distr: 3 } : { time: false }, y: { range: [0, 1] } },
    axes: [{ label: 'JCT (h)' }, { label: 'fraction of jobs' }],
    series: [{ label: 'JCT h' }, ...runSeries({ paths: uPlot.paths.stepped({ align: 1 }) })],
    plugins: [seriesTip('JCT ≤', 'h: fraction of jobs done')],
  }, aligned(cdf));
  mkChart($('#chart-util'), {
    scales: { x: { time: false }, y: { range: [0, 1] } },
    axes: [{ label: 'time (h)' }, { label: 'GPUs allocated / total' }],
    series: [{ label: 'h' }, ...runSeries()],
    plugins: [seriesTip('t =', 'h: GPUs allocated / total'), roundClickPlugin()],
  }, aligned(state.runs.map((r) => r.rounds.map((x) => [x.time_s / HOUR, x.gpus_allocated / r.total_gpus]))));
  // Goodput: each job's statistically efficient progress as a share of its
  // whole work, summed, per hour (the engine's ground truth; see work_rate).
  mkChart($('#chart-goodput'), {
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(1e-9, max)] } },
    axes: [{ label: 'time (h)' }, { label: 'jobs\' worth / h' }],
    series: [{ label: 'h' }, ...runSeries({ paths: uPlot.paths.stepped({ align: -1 }) })],
    plugins: [seriesTip('t =', 'h: jobs\' worth of work done per hour, in the interval ending then'), roundClickPlugin()],
  }, aligned(state.runs.map((r) => (r.work_rate ?? []).map(([t, v]) => [t / HOUR, v]))));
  mkChart($('#chart-planner'), {
    scales: { x: { time: false }, y: { distr: 3 } },
    axes: [{ label: 'time (h)' }, { label: 'ms' }],
    series: [{ label: 'h' }, ...runSeries({ width: 1 })],
    plugins: [seriesTip('t =', 'h: planner ms'), roundClickPlugin()],
  }, aligned(state.runs.map((r) => r.rounds.map((x) => [x.time_s / HOUR, Math.max(1e-3, x.planner_ms)]))));
  renderGantt();
  renderJobHistory();
}

function fillJobPick() {
  const r = ganttRun();
  const sel = $('#job-pick');
  const keep = sel.value;
  sel.innerHTML = '';
  // Jobs that moved most first: their history is the interesting one.
  const moves = new Map();
  for (const s of r.segments) moves.set(s.job, (moves.get(s.job) ?? 0) + 1);
  const jobs = [...r.jobs].sort((a, b) => (moves.get(b.id) ?? 0) - (moves.get(a.id) ?? 0) || a.id - b.id);
  for (const j of jobs) sel.add(new Option(`${j.name} (${moves.get(j.id) ?? 0} allocations)`, String(j.id)));
  if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
}

/// One job's segments, in time order.
function jobSegments(r, id) {
  return r.segments.filter((s) => s.job === id).sort((a, b) => a.start_s - b.start_s);
}

/// One job's GPUs over time: a step per segment, 0 between them; the
/// tooltip names the nodes it held.
function renderJobHistory() {
  const r = ganttRun();
  const el = $('#chart-job');
  const old = el.uplot;
  if (old && state.charts.includes(old)) {
    state.charts = state.charts.filter((c) => c !== old);
    old.destroy();
  }
  if (!r) return;
  const id = Number($('#job-pick').value);
  const job = r.jobs.find((j) => j.id === id);
  if (!job) return;
  const segs = jobSegments(r, id);
  const pts = [[job.submit_s, 0]];
  for (const s of segs) {
    pts.push([s.start_s, s.nodes.reduce((n, [, k]) => n + k, 0)]);
    pts.push([s.end_s, 0]);
  }
  pts.push([job.completion_s, 0]);
  // Equal times (a segment ending where the next starts): the later point wins.
  const xs = [];
  const ys = [];
  for (const [x, y] of pts) {
    if (xs.length && xs[xs.length - 1] === x / HOUR) ys[ys.length - 1] = y;
    else {
      xs.push(x / HOUR);
      ys.push(y);
    }
  }
  const nodes = r.cluster.nodes;
  const tip = tooltipPlugin((u) => {
    const t = u.posToVal(u.cursor.left, 'x') * HOUR;
    const s = segs.find((x) => x.start_s <= t && t < x.end_s);
    const when = `<b>t = ${fmt(t / HOUR)} h</b>`;
    if (!s) return `${when}<div>${esc(job.name)}: no GPUs</div>`;
    return `${when}<div>${esc(job.name)}: <span class="tip-gpus">${s.nodes.reduce((n, [, k]) => n + k, 0)}</span> GPUs on ` +
      `${s.nodes.map(([n, k]) => `${esc(nodes[n].name)}×${k}`).join(', ')}</div>`;
  });
  mkChart(el, {
    height: 200,
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    axes: [{ label: 'time (h)' }, { label: 'GPUs' }],
    series: [{ label: 'h' }, { label: `${job.name}: GPUs`, stroke: COLORS[0], width: 1.5, fill: 'rgba(31,111,235,.12)',
      paths: uPlot.paths.stepped({ align: 1 }) }],
    plugins: [tip],
  }, [xs, ys]);
}

function jobColor(id) {
  return `hsl(${(id * 137.508) % 360}, 60%, 55%)`;
}

/// Places each segment's GPUs on GPU slots of its nodes, as the CLI's Gantt
/// does (interval colouring per node), so that jobs sharing a node are drawn
/// side by side instead of over each other. Returns one bar per GPU slot.
function ganttBars(run) {
  const free = run.cluster.nodes.map((n) => new Array(n.gpus).fill(0));
  const segs = [...run.segments].sort((a, b) => a.start_s - b.start_s);
  const bars = [];
  for (const s of segs) {
    for (const [node, gpus] of s.nodes) {
      const slots = free[node];
      let placed = 0;
      for (let slot = 0; slot < slots.length && placed < gpus; slot++) {
        if (slots[slot] <= s.start_s + 1e-9) {
          slots[slot] = s.end_s;
          placed++;
          bars.push({ job: s.job, node, slot, start_s: s.start_s, end_s: s.end_s, seg: s });
        }
      }
    }
  }
  return bars;
}

/// Rows taller than this many pixels in all scroll inside the figure.
const GANTT_MAX_PX = 560;

function ganttRun() {
  return state.runs[Number($('#gantt-run').value) || 0];
}

/// Job id -> name, for labels.
function jobNames(r) {
  return new Map(r.jobs.map((j) => [j.id, j.name]));
}

function renderGantt() {
  const r = ganttRun();
  if (!r) return;
  const nodes = r.cluster.nodes;
  const end = Math.max(...r.segments.map((s) => s.end_s), 1) / HOUR;
  const bars = ganttBars(r);
  const names = jobNames(r);
  const el = $('#chart-gantt');
  el.ganttBars = bars;
  // The bar under the cursor: its node from the row, its GPU lane from the
  // height within the row (as drawn below), then the one covering that time.
  const barAt = (u, left, top) => {
    const t = u.posToVal(left, 'x') * HOUR;
    const y = u.posToVal(top, 'y');
    const node = Math.floor(y);
    if (!nodes[node]) return null;
    const slot = Math.floor((node + 0.95 - y) / (0.9 / nodes[node].gpus));
    return bars.find((b) => b.node === node && b.slot === slot && b.start_s <= t && t < b.end_s) ?? null;
  };
  const tip = tooltipPlugin((u, left, top) => {
    const b = barAt(u, left, top);
    if (!b) return null;
    const gpus = b.seg.nodes.reduce((n, [, k]) => n + k, 0);
    const where = b.seg.nodes.map(([n, k]) => `${esc(nodes[n].name)}×${k}`).join(', ');
    return `<b>${esc(names.get(b.job) ?? b.job)}</b> <small>(job ${b.job})</small>` +
      `<div>${gpus} GPU${gpus === 1 ? '' : 's'} on ${where}</div>` +
      `<div>this lane: <span class="tip-node">${esc(nodes[b.node].name)}</span> GPU ${b.slot}</div>` +
      `<div>${(b.start_s / HOUR).toFixed(2)}–${(b.end_s / HOUR).toFixed(2)} h</div>`;
  });
  el.style.maxHeight = `${GANTT_MAX_PX}px`;
  // Every label fits at 12 px a row; past that, every k-th node is named.
  const rowPx = Math.max(4, Math.min(16, Math.floor(4000 / nodes.length)));
  const every = Math.max(1, Math.ceil(12 / rowPx));
  mkChart(el, {
    height: Math.max(220, rowPx * nodes.length + 60),
    scales: { x: { time: false, range: (u, min, max) => [min, max] }, y: { range: [0, nodes.length] } },
    axes: [{ label: 'time (h)' }, {
      label: 'node (rows: its GPUs)',
      size: 70,
      grid: { show: false },
      splits: () => nodes.map((_, i) => i + 0.5).filter((_, i) => i % every === 0),
      values: (u, ticks) => ticks.map((t) => nodes[Math.floor(t)]?.name ?? ''),
    }],
    series: [{}, { label: 'allocations', stroke: 'transparent' }],
    legend: { show: false },
    plugins: [tip],
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        // Zoomed in, bars outside the time span stay off the axes.
        ctx.beginPath();
        ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
        ctx.clip();
        // Node boundaries.
        ctx.strokeStyle = '#c8d0d8';
        ctx.lineWidth = 1;
        ctx.beginPath();
        for (let i = 0; i <= nodes.length; i++) {
          const y = Math.round(u.valToPos(i, 'y', true)) + 0.5;
          ctx.moveTo(u.bbox.left, y);
          ctx.lineTo(u.bbox.left + u.bbox.width, y);
        }
        ctx.stroke();
        for (const b of bars) {
          const x0 = u.valToPos(b.start_s / HOUR, 'x', true);
          const x1 = u.valToPos(b.end_s / HOUR, 'x', true);
          const h = 0.9 / nodes[b.node].gpus;
          const y0 = u.valToPos(b.node + 0.95 - b.slot * h, 'y', true);
          const y1 = u.valToPos(b.node + 0.95 - (b.slot + 0.85) * h, 'y', true);
          ctx.fillStyle = jobColor(b.job);
          ctx.fillRect(x0, y0, Math.max(1, x1 - x0), Math.max(1, y1 - y0));
        }
        ctx.restore();
      }],
    },
  }, [[0, end], [null, null]]);
}

function fillRunSelects() {
  for (const sel of [$('#gantt-run'), $('#inspect-run')]) {
    sel.innerHTML = '';
    state.runs.forEach((r, i) => sel.add(new Option(`${r.scenario.label}: ${r.summary.policy}`, String(i))));
  }
}

function renderResults() {
  $('#results').hidden = false;
  $('#inspector').hidden = false;
  fillRunSelects();
  fillJobPick();
  renderSummary();
  renderCharts();
  const r = state.runs[0];
  $('#inspect-index').value = Math.floor(r.rounds.length / 2);
  inspect();
}

// ---------- load sweep ----------

/// The load multipliers typed in, or an error naming the bad one.
function sweepLoads() {
  const parts = $('#sweep-loads').value.split(/[,\s]+/).filter(Boolean);
  const loads = parts.map(Number);
  const bad = parts.find((p, i) => !(Number.isFinite(loads[i]) && loads[i] > 0));
  if (bad !== undefined) throw new Error(`load multiplier must be a number > 0, got "${bad}"`);
  if (!loads.length) throw new Error('no load multiplier given');
  return [...new Set(loads)].sort((a, b) => a - b);
}

function sweepPolicies() {
  return [...document.querySelectorAll('#sweep-policies input:checked')].map((c) => c.value);
}

/// Every (policy, load) of the first scenario, in the worker, one at a
/// time; Cancel stops the one running and keeps those done.
async function runSweep() {
  let loads;
  try {
    loads = sweepLoads();
  } catch (e) {
    $('#sweep-status').textContent = e.message;
    return;
  }
  const policies = sweepPolicies();
  if (!policies.length) {
    $('#sweep-status').textContent = 'Choose at least one policy.';
    return;
  }
  const base = scenarios()[0];
  const bad = precheck(base);
  if (bad) {
    $('#sweep-status').textContent = bad;
    return;
  }
  const todo = policies.flatMap((policy) => loads.map((load) => ({ policy, load })));
  state.sweep = { base, loads, policies, points: [], failed: [] };
  $('#run').disabled = true;
  $('#sweep-run').disabled = true;
  $('#sweep-cancel').disabled = false;
  let cancelled = false;
  for (let i = 0; i < todo.length && !cancelled; i++) {
    const { policy, load } = todo[i];
    $('#sweep-status').textContent = `Running ${policy} at load × ${load} (${i + 1}/${todo.length})…`;
    $('#sweep-progress').value = i / todo.length;
    try {
      const { result } = await runInWorker({ ...base, policy, load, label: `${policy} ×${load}` }, (p) => {
        $('#sweep-progress').value = (i + p.done / Math.max(1, p.total)) / todo.length;
      });
      state.sweep.points.push({ policy, load, summary: result.summary });
    } catch (e) {
      if (e.message === 'cancelled') cancelled = true;
      else state.sweep.failed.push(`${policy} at load × ${load}: ${e.message}`);
    }
    renderSweep();
  }
  const n = state.sweep.points.length;
  $('#sweep-progress').value = n / todo.length;
  saveResults();
  $('#sweep-status').textContent = (cancelled ? `Sweep cancelled; kept ${n} of ${todo.length} runs.`
    : `Sweep done: ${n} of ${todo.length} runs.`) + (state.sweep.failed.length ? ` Failed: ${state.sweep.failed.join('; ')}` : '');
  $('#run').disabled = false;
  $('#sweep-run').disabled = false;
  $('#sweep-cancel').disabled = true;
}

function renderSweep() {
  const sw = state.sweep;
  if (!sw) return;
  const key = $('#sweep-metric').value;
  const name = $('#sweep-metric').selectedOptions[0].textContent;
  const value = (policy, load) => sw.points.find((p) => p.policy === policy && p.load === load)?.summary[key];
  $('#sweep-table').innerHTML = `<tr><th>policy</th>${sw.loads.map((l) => `<th>load × ${l}</th>`).join('')}</tr>` +
    sw.policies.map((policy) => `<tr><td>${esc(policy)}</td>${sw.loads.map((load) => {
      const v = value(policy, load);
      return `<td data-policy="${esc(policy)}" data-load="${load}">${v == null ? '–' : fmt(v / HOUR)}</td>`;
    }).join('')}</tr>`).join('') +
    `<caption>${esc(name)} JCT (h) of ${esc(sw.base.label)} (${esc(sw.base.workload)}, cluster ${esc(sw.base.cluster)})</caption>`;
  const el = $('#chart-sweep');
  const old = el.uplot;
  if (old) {
    old.destroy();
    el.uplot = null;
  }
  mkSweepChart(el, sw, name, value);
}

function mkSweepChart(el, sw, name, value) {
  el.innerHTML = '';
  const data = [sw.loads, ...sw.policies.map((p) => sw.loads.map((l) => {
    const v = value(p, l);
    return v == null ? null : v / HOUR;
  }))];
  el.uplot = new uPlot({
    width: chartWidth(el),
    height: 260,
    cursor: CURSOR,
    scales: { x: { time: false } },
    axes: [{ label: 'load × (submit times divided by it)' }, { label: `${name} JCT (h)` }],
    series: [{ label: 'load ×' }, ...sw.policies.map((p, i) => ({
      label: p, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true, points: { size: 6 },
    }))],
  }, data, el);
}

// ---------- results kept across reloads ----------

/// The last results (and load sweep) live in IndexedDB, so a reload or a
/// closed tab does not lose them. Rounds for the inspector live in the
/// engine's memory only: restored results say so instead of inspecting.
const DB = { name: 'gpuplan-explorer', store: 'results', key: 'last' };

function openDb() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB.name, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(DB.store);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

async function dbDo(mode, f) {
  const db = await openDb();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(DB.store, mode);
      const req = f(tx.objectStore(DB.store));
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  } finally {
    db.close();
  }
}

async function saveResults() {
  try {
    const runs = state.runs.map(({ restored, ...r }) => r);
    await dbDo('readwrite', (s) => s.put({ saved_at: Date.now(), runs, sweep: state.sweep ?? null }, DB.key));
    document.body.dataset.saved = String(Date.now());
  } catch (e) {
    // Private windows or a full disk: the results are still on the page.
    console.warn('could not keep the results:', e);
  }
}

async function restoreResults() {
  let saved;
  try {
    saved = await dbDo('readonly', (s) => s.get(DB.key));
  } catch {
    return;
  }
  if (saved?.sweep) {
    state.sweep = saved.sweep;
    renderSweep();
    $('#sweep-status').textContent = 'Restored the last sweep.';
  }
  if (!saved?.runs?.length) return;
  state.runs = saved.runs.map((r) => ({ ...r, restored: true }));
  renderResults();
  setStatus(`Ready. Showing the last results, kept from ${new Date(saved.saved_at).toLocaleString()}.`);
}

async function forgetResults() {
  await dbDo('readwrite', (s) => s.delete(DB.key));
  setStatus('Saved results forgotten (the page keeps showing them until it is reloaded).');
}

// ---------- round inspector ----------

const RESTORED_NOTE = 'These results were kept from an earlier visit; their rounds lived in the engine\'s memory and are gone. ' +
  'Run the scenarios again to inspect rounds.';

async function inspect() {
  const r = state.runs[Number($('#inspect-run').value) || 0];
  if (!r) return;
  if (r.restored) {
    state.inspected = null;
    $('#inspect-head').innerHTML = `<div class="note restored">${esc(RESTORED_NOTE)}</div>`;
    $('#inspect-jobs').innerHTML = '';
    return;
  }
  const max = Math.max(0, r.rounds.length - 1);
  $('#inspect-index').max = max;
  $('#inspect-slider').max = max;
  const index = Math.min(max, Math.max(0, Number($('#inspect-index').value) || 0));
  $('#inspect-slider').value = index;
  try {
    const d = await inspectInWorker(r.run_id, index);
    renderInspector(d);
  } catch (e) {
    showError(e.message);
  }
}

async function resolveRound() {
  const r = state.runs[Number($('#inspect-run').value) || 0];
  if (!r || !state.inspected) return;
  const planner = $('#resolve-planner').value;
  const out = $('#resolve-out');
  out.textContent = `Solving round ${state.inspected.index} with ${planner}…`;
  try {
    const d = await inspectInWorker(r.run_id, state.inspected.index,
      { planner, time_limit_s: r.scenario.time_limit_s || 10, seed: r.scenario.seed });
    const diff = d.objective - state.inspected.objective;
    // A fallback (e.g. the MIP out of time) says why, and where each job went.
    out.innerHTML = `${esc(d.planner)}: objective <b class="resolved-objective">${d.objective.toFixed(4)}</b> ` +
      `(${diff >= 0 ? '+' : ''}${diff.toFixed(4)} vs ${esc(state.inspected.planner)}), status ${d.status}, ` +
      `bound ${boundText(d)}, gap ${gapText(d)}, ${d.solve_ms.toFixed(1)} ms` +
      (d.reason ? `<div class="reason">note: ${esc(d.reason)}</div>` : '') +
      `<div class="placement">placement: ${d.jobs.map((j) => `${esc(j.name)} ${placement(j)}`).join('; ')}</div>`;
  } catch (e) {
    out.textContent = e.message;
  }
}

const NO_BOUND = 'no proven bound: the planner is not a MIP, or the solver stopped before proving one';

/// The solver's own bound; shown to 6 digits so that it never reads below
/// the objective after rounding.
function boundText(d) {
  return d.bound == null ? `<span class="none" title="${NO_BOUND}">—</span>` : `<span class="bound">${d.bound.toFixed(6)}</span>`;
}

function gapText(d) {
  return d.gap == null ? `<span class="none" title="${NO_BOUND}">—</span>` : `<span class="gap">${d.gap.toExponential(2)}</span>`;
}

function placement(j) {
  if (!j.chosen_gpus) return 'none';
  return j.chosen.map(([n, k]) => `n${n}×${k}`).join(' ');
}

const HARDWARE_NOTE = 'GPUs: the chosen GPUs\' type; with GPU variability, the slowest of them for the job\'s class ' +
  '(node, GPU index: its slowdown, 1 = median speed) and the expected factor: that slowdown, × the cross-node L if the job spans nodes, ' +
  'as the placement stage prices it (the simulator applies L to rigid trace jobs only).';

/// The job's GPU type and, with variability, its slowest GPU (computed by
/// the engine, gpuplan_core::JobGpus, as `gpuplan plan` prints it).
function hardwareCell(j) {
  const h = j.hardware;
  if (!h) return '<td class="hardware">–</td>';
  const type = `<span class="gpu-type">${esc(h.gpu_types.join('+'))}</span>`;
  const v = h.variability;
  if (!v) return `<td class="hardware">${type}</td>`;
  const [n, g] = v.slowest_gpu;
  return `<td class="hardware">${type} <span class="slowest" title="slowest GPU for class ${v.class}: ` +
    `node ${n} (${esc(v.slowest_node)}), GPU ${g}">slowest ${esc(v.slowest_node)}/${g} ×${v.slowdown.toFixed(3)}</span> ` +
    `<small>class ${v.class}, expected <span class="expected">×${v.expected_factor.toFixed(3)}</span></small></td>`;
}

/// Who shares with whom: each GPU the plan gives two or more jobs.
function sharingBlock(d) {
  const shared = d.shared_gpus || [];
  if (!shared.length) return '';
  const items = shared.map((g) => `<li><span class="gpu">${esc(g.node_name)}/GPU ${g.gpu}</span>: ` +
    `${g.jobs.map((j) => `<span class="job">${esc(j)}</span>`).join(' + ')}</li>`);
  return `<div class="shared-gpus"><b>shared GPUs</b> (${shared.length})<ul>${items.join('')}</ul></div>`;
}

function renderInspector(d) {
  state.inspected = d;
  $('#resolve-out').textContent = '';
  const gap = gapText(d);
  const bound = boundText(d);
  $('#inspect-head').innerHTML =
    `<span>round <b>${d.index}</b> of ${d.rounds}</span><span>t = ${(d.now_s / HOUR).toFixed(2)} h</span>` +
    `<span>planner <b>${esc(d.planner)}</b></span><span>status <b class="status">${d.status}</b></span>` +
    `<span>objective <b class="objective">${d.objective.toFixed(4)}</b></span><span>bound ${bound}</span>` +
    `<span>gap ${gap}</span><span>solve ${d.solve_ms.toFixed(2)} ms</span><span>p = ${d.p}</span>` +
    `<span>fair share ${d.fair_share[1]} GPU</span>` + (d.reason ? `<div class="reason">note: ${esc(d.reason)}</div>` : '') +
    (d.bound == null ? `<div class="note">bound and gap —: ${NO_BOUND}.</div>` : '') +
    `<div class="note">${GOODPUT_NOTE}</div><div class="note">${HARDWARE_NOTE}</div>` + sharingBlock(d);
  const rows = d.jobs.map((j) => {
    const table = j.speedups
      .filter((s) => s.gpus === j.chosen_gpus || (s.gpus & (s.gpus - 1)) === 0)
      .map((s) => (s.gpus === j.chosen_gpus ? `<b>[${s.gpus}:${s.speedup.toFixed(2)}]</b>` : `${s.gpus}:${s.speedup.toFixed(2)}`))
      .join(' ');
    const chosen = j.chosen_gpus ? `${j.chosen_gpus} GPUs on ${j.chosen_nodes} node(s) ` +
      `<small>${j.chosen.map(([n, k]) => `n${n}×${k}`).join(' ')}</small>` : '–';
    return `<tr><td>${esc(j.name)}</td><td>${j.app}</td><td>${(j.age_s / HOUR).toFixed(2)}</td><td>${j.epoch}</td>` +
      `<td>${j.restarts}</td><td>${j.before_gpus}</td><td class="${j.chosen_gpus !== j.before_gpus ? 'chosen' : ''}">${chosen}</td>` +
      hardwareCell(j) +
      `<td>${j.chosen_speedup.toFixed(3)}</td><td>${j.value.toFixed(3)}</td>` +
      `<td class="speedups" title="speedup over the fair share by GPUs (packed); ${j.has_model ? 'fitted model' : 'no model yet: linear'}">${table}</td></tr>`;
  });
  $('#inspect-jobs').innerHTML = '<tr><th>job</th><th>app</th><th>age (h)</th><th>epoch</th><th>restarts</th>' +
    '<th>GPUs before</th><th>chosen</th><th>GPUs</th><th>speedup</th><th>value</th><th>speedup by GPUs</th></tr>' + rows.join('');
}

// ---------- export ----------

function download(name, text, type) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function csv(rows) {
  return rows.map((r) => r.map((v) => {
    const s = v == null ? '' : String(v);
    return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  }).join(',')).join('\n') + '\n';
}

// ---------- per-chart export ----------

/// Each chart's data as rows, the header naming the units. What the CSV
/// holds is what the chart draws (every finished job, every round, every
/// Gantt segment), in seconds as the engine gives them and in hours as drawn.
const CHART_CSV = {
  sweep: () => {
    const rows = [['policy', 'load ×', 'jobs', 'mean JCT (s)', 'p50 JCT (s)', 'p99 JCT (s)', 'makespan (s)', 'GPU allocation (fraction)']];
    for (const p of state.sweep?.points ?? []) {
      const s = p.summary;
      rows.push([p.policy, p.load, s.jobs, s.avg_jct_s, s.p50_jct_s, s.p99_jct_s, s.makespan_s, s.gpu_utilization]);
    }
    return rows;
  },
  cdf: () => {
    const rows = [['scenario', 'policy', 'job', 'jct (s)', 'jct (h)', 'fraction of jobs']];
    for (const r of state.runs) {
      const jobs = [...r.jobs].sort((a, b) => a.jct_s - b.jct_s);
      jobs.forEach((j, k) => rows.push([r.scenario.label, r.summary.policy, j.name, j.jct_s, j.jct_s / HOUR, (k + 1) / jobs.length]));
    }
    return rows;
  },
  util: () => {
    const rows = [['scenario', 'policy', 'round', 'time (s)', 'time (h)', 'GPUs allocated', 'GPUs total', 'allocation (fraction)']];
    for (const r of state.runs) {
      r.rounds.forEach((x, i) => rows.push([r.scenario.label, r.summary.policy, i, x.time_s, x.time_s / HOUR,
        x.gpus_allocated, r.total_gpus, x.gpus_allocated / r.total_gpus]));
    }
    return rows;
  },
  goodput: () => {
    const rows = [['scenario', 'policy', 'time (s)', 'time (h)', 'jobs\' worth of work per hour (interval ending then)']];
    for (const r of state.runs) for (const [t, v] of r.work_rate ?? []) rows.push([r.scenario.label, r.summary.policy, t, t / HOUR, v]);
    return rows;
  },
  planner: () => {
    const rows = [['scenario', 'policy', 'round', 'time (s)', 'time (h)', 'planner (ms)', 'status']];
    for (const r of state.runs) {
      r.rounds.forEach((x, i) => rows.push([r.scenario.label, r.summary.policy, i, x.time_s, x.time_s / HOUR, x.planner_ms, x.status]));
    }
    return rows;
  },
  job: () => {
    const r = ganttRun();
    const id = Number($('#job-pick').value);
    const name = jobNames(r).get(id);
    const rows = [['scenario', 'policy', 'job id', 'job', 'start (s)', 'end (s)', 'start (h)', 'end (h)', 'GPUs', 'nodes (name×GPUs)']];
    for (const s of jobSegments(r, id)) {
      rows.push([r.scenario.label, r.summary.policy, id, name, s.start_s, s.end_s, s.start_s / HOUR, s.end_s / HOUR,
        s.nodes.reduce((n, [, k]) => n + k, 0), s.nodes.map(([n, k]) => `${r.cluster.nodes[n].name}×${k}`).join(' ')]);
    }
    return rows;
  },
  gantt: () => {
    const r = ganttRun();
    const names = jobNames(r);
    const rows = [['scenario', 'policy', 'job id', 'job', 'node', 'GPUs', 'start (s)', 'end (s)', 'start (h)', 'end (h)']];
    for (const s of r.segments) {
      for (const [node, gpus] of s.nodes) {
        rows.push([r.scenario.label, r.summary.policy, s.job, names.get(s.job), r.cluster.nodes[node].name, gpus,
          s.start_s, s.end_s, s.start_s / HOUR, s.end_s / HOUR]);
      }
    }
    return rows;
  },
};

function chartCsv(name) {
  download(`gpuplan-${name}.csv`, csv(CHART_CSV[name]()), 'text/csv');
}

/// The chart as a PNG: its canvas on white, under its caption and a legend
/// of the scenarios drawn (the page's legend is HTML, not on the canvas).
function chartPng(name) {
  const fig = document.querySelector(`figure[data-chart=${name}]`);
  const u = fig.querySelector('.uplot')?.parentElement.uplot;
  if (!u) return;
  const src = u.ctx.canvas;
  const dpr = src.width / u.width;
  const head = Math.round(44 * dpr);
  const out = document.createElement('canvas');
  out.width = src.width;
  out.height = src.height + head;
  const ctx = out.getContext('2d');
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, out.width, out.height);
  ctx.fillStyle = '#1b1f24';
  ctx.font = `600 ${Math.round(14 * dpr)}px sans-serif`;
  const title = fig.querySelector('.title').textContent.replace(/:$/, '');
  const sub = name === 'gantt' || name === 'job' ? ` ${ganttRun().scenario.label} (${ganttRun().summary.policy})` : '';
  const job = name === 'job' ? `, ${$('#job-pick').selectedOptions[0]?.textContent.replace(/ \(.*/, '')}` : '';
  ctx.fillText(title + sub + job, 8 * dpr, 17 * dpr);
  if (name !== 'gantt' && name !== 'job') {
    ctx.font = `${Math.round(12 * dpr)}px sans-serif`;
    let x = 8 * dpr;
    const labels = name === 'sweep' ? state.sweep.policies : state.runs.map((r) => `${r.scenario.label}: ${r.summary.policy}`);
    labels.forEach((label, i) => {
      ctx.fillStyle = COLORS[i % COLORS.length];
      ctx.fillRect(x, 28 * dpr, 14 * dpr, 4 * dpr);
      ctx.fillStyle = '#1b1f24';
      ctx.fillText(label, x + 18 * dpr, 35 * dpr);
      x += ctx.measureText(label).width + 34 * dpr;
    });
  }
  ctx.drawImage(src, 0, head);
  const a = document.createElement('a');
  a.href = out.toDataURL('image/png');
  a.download = `gpuplan-${name}.png`;
  a.click();
}

function addChartTools() {
  for (const fig of document.querySelectorAll('figure[data-chart]')) {
    const name = fig.dataset.chart;
    const tools = document.createElement('span');
    tools.className = 'chart-tools';
    tools.innerHTML = '<button type="button" class="csv" title="This chart\'s data as CSV">CSV</button>' +
      '<button type="button" class="png" title="This chart as a PNG image">PNG</button>' +
      '<button type="button" class="reset-zoom" title="Drag across the chart to zoom into a time span; this shows all of it again (so does a double-click)">Reset zoom</button>';
    tools.querySelector('.reset-zoom').addEventListener('click', () => resetZoom(name));
    tools.querySelector('.csv').addEventListener('click', () => chartCsv(name));
    tools.querySelector('.png').addEventListener('click', () => chartPng(name));
    fig.querySelector('figcaption').append(tools);
  }
}

function exportJson() {
  const out = state.runs.map(({ run_id, elapsed_ms, restored, ...r }) => r);
  download('gpuplan-results.json', JSON.stringify(out, null, 2), 'application/json');
}

function exportJobsCsv() {
  const rows = [['scenario', 'policy', 'workload', 'name', 'app', 'submit_s', 'completion_s', 'jct_s', 'restarts', 'attained_gpu_s', 'max_gpus_used']];
  for (const r of state.runs) {
    for (const j of r.jobs) {
      rows.push([r.scenario.label, r.summary.policy, r.summary.workload, j.name, j.app, j.submit_s, j.completion_s, j.jct_s, j.restarts, j.attained_gpu_s, j.max_gpus_used]);
    }
  }
  download('gpuplan-jobs.csv', csv(rows), 'text/csv');
}

function exportRoundsCsv() {
  const rows = [['scenario', 'policy', 'time_s', 'active', 'running', 'gpus_allocated', 'restarts', 'planner_ms', 'status', 'bound', 'gap']];
  for (const r of state.runs) {
    for (const x of r.rounds) {
      rows.push([r.scenario.label, r.summary.policy, x.time_s, x.active, x.running, x.gpus_allocated, x.restarts, x.planner_ms, x.status, x.bound, x.gap]);
    }
  }
  download('gpuplan-rounds.csv', csv(rows), 'text/csv');
}

// ---------- start ----------

async function main() {
  try {
    state.catalog = await startWorker();
  } catch (e) {
    setStatus('The engine did not load.');
    showError(e.message);
    return;
  }
  for (const f of state.catalog.formats) {
    const li = document.createElement('li');
    li.innerHTML = `<b>${esc(f.name)}</b>: ${esc(f.looks_like)}`;
    $('#formats').append(li);
  }
  for (const [f, text] of Object.entries(FIELD_HELP)) {
    const li = document.createElement('li');
    li.innerHTML = `<b>${esc(FIELD_NAMES[f])}</b>: ${esc(text)}`;
    $('#field-help').append(li);
  }
  const [nodes, gpus, jobs] = state.catalog.limits;
  $('#limits').textContent = `The browser takes at most ${nodes} nodes, ${gpus} GPUs and ${jobs} jobs ` +
    '(it keeps every round for the inspector, in at most 4 GiB); the CLI has no such limit.';
  const saved = decodeState();
  for (const s of saved ?? [{}]) addScenario(s);
  $('#add-scenario').addEventListener('click', () => {
    const list = scenarios();
    addScenario({ ...list[list.length - 1], label: '' });
  });
  $('#run').addEventListener('click', runAll);
  $('#cancel').addEventListener('click', cancelRun);
  $('#share').addEventListener('click', async () => {
    const url = location.href.split('#')[0] + encodeState();
    try {
      await navigator.clipboard.writeText(url);
      setStatus('Link copied.');
    } catch {
      setStatus(url);
    }
  });
  $('#export-json').addEventListener('click', exportJson);
  $('#forget').addEventListener('click', forgetResults);
  $('#export-jobs-csv').addEventListener('click', exportJobsCsv);
  $('#export-rounds-csv').addEventListener('click', exportRoundsCsv);
  addChartTools();
  $('#gantt-run').addEventListener('change', () => {
    const c = $('#chart-gantt').uplot;
    if (state.charts.includes(c)) {
      state.charts = state.charts.filter((x) => x !== c);
      c.destroy();
    }
    renderGantt();
    fillJobPick();
    renderJobHistory();
  });
  $('#job-pick').addEventListener('change', renderJobHistory);
  $('#inspect-run').addEventListener('change', inspect);
  $('#cdf-log').addEventListener('change', renderCharts);
  for (const p of state.catalog.policies) $('#resolve-planner').add(new Option(p, p));
  $('#resolve-planner').value = 'pollux-mip';
  $('#resolve').addEventListener('click', resolveRound);
  $('#inspect-index').addEventListener('change', inspect);
  $('#inspect-slider').addEventListener('input', () => {
    $('#inspect-index').value = $('#inspect-slider').value;
    inspect();
  });
  for (const p of state.catalog.policies) {
    const l = document.createElement('label');
    l.title = POLICY_HELP[p] ?? '';
    l.innerHTML = `<input type="checkbox" value="${esc(p)}"${['tiresias', 'pollux-mip'].includes(p) ? ' checked' : ''}> ${esc(p)}`;
    $('#sweep-policies').append(l);
  }
  $('#sweep-run').addEventListener('click', runSweep);
  $('#sweep-cancel').addEventListener('click', cancelRun);
  $('#sweep-metric').addEventListener('change', renderSweep);
  $('#run').disabled = false;
  $('#sweep-run').disabled = false;
  setStatus('Ready.');
  await restoreResults();
  performance.mark('explorer-ready');
  document.body.dataset.ready = '1';
}

main();
