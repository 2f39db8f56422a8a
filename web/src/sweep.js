// The load sweep: every chosen policy at every load multiplier.
import uPlot from 'uplot';
import { $, COLORS, HOUR, fmt, esc } from './util.js';
import { state } from './state.js';
import { runInWorker } from './engine.js';
import { scenarios, precheck } from './scenario.js';
import { chartWidth, CURSOR } from './charts.js';
import { saveResults } from './store.js';

/// The load multipliers typed in, or an error naming the bad one.
function sweepLoads() {
  const parts = $('#sweep-loads').value.split(/[,\s]+/).filter(Boolean);
  const loads = parts.map(Number);
  const bad = parts.find((p, i) => !(Number.isFinite(loads[i]) && loads[i] > 0));
  if (bad !== undefined) throw new Error(`load multiplier must be a number > 0, got "${bad}"`);
  if (!loads.length) throw new Error('no load multiplier given');
  return [...new Set(loads)].sort((a, b) => a - b);
}

/// The seeds typed in (as `gpuplan sweep --seeds`), else the scenario's own.
function sweepSeeds(base) {
  const parts = $('#sweep-seeds').value.split(/[,\s]+/).filter(Boolean);
  if (!parts.length) return [base.seed];
  const bad = parts.find((p) => !/^\d+$/.test(p) || !Number.isSafeInteger(Number(p)));
  if (bad !== undefined) throw new Error(`seed must be a whole number >= 0, got "${bad}"`);
  return [...new Set(parts.map(Number))];
}

/// The first scenario's workload, then the other bundled ones picked (as
/// `gpuplan sweep --workloads A B ...`).
function sweepWorkloads(base) {
  const more = [...document.querySelectorAll('#sweep-workloads option:checked')].map((o) => o.value);
  return [base.workload, ...more.filter((w) => w !== base.workload)];
}

/// Mean, sample standard deviation, least and most of a list of numbers.
export function spread(xs) {
  const n = xs.length;
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  const sd = n > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1)) : 0;
  return { n, mean, sd, min: Math.min(...xs), max: Math.max(...xs) };
}

function sweepPolicies() {
  return [...document.querySelectorAll('#sweep-policies input:checked')].map((c) => c.value);
}

/// Every (policy, load) of the first scenario, in the worker, one at a
/// time; Cancel stops the one running and keeps those done.
export async function runSweep() {
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
  let seeds;
  try {
    seeds = sweepSeeds(base);
  } catch (e) {
    $('#sweep-status').textContent = e.message;
    return;
  }
  const workloads = sweepWorkloads(base);
  const todo = policies.flatMap((policy) => loads.flatMap((load) => workloads.flatMap((workload) =>
    seeds.map((seed) => ({ policy, load, workload, seed })))));
  state.sweep = { base, loads, policies, seeds, workloads, points: [], failed: [] };
  $('#run').disabled = true;
  $('#sweep-run').disabled = true;
  $('#sweep-cancel').disabled = false;
  let cancelled = false;
  for (let i = 0; i < todo.length && !cancelled; i++) {
    const { policy, load, workload, seed } = todo[i];
    const what = `${policy} at load × ${load}` + (workloads.length > 1 ? ` on ${workload}` : '') +
      (seeds.length > 1 ? ` seed ${seed}` : '');
    $('#sweep-status').textContent = `Running ${what} (${i + 1}/${todo.length})…`;
    $('#sweep-progress').value = i / todo.length;
    try {
      // The sweep plots JCT only: no fairness, estimates or round log per point.
      const run = { ...base, policy, load, workload, seed, label: `${policy} ×${load}`, fairness: false, estimates: false, round_log: false };
      if (workload !== base.workload) delete run.upload;
      const { result } = await runInWorker(run, (p) => {
        $('#sweep-progress').value = (i + p.done / Math.max(1, p.total)) / todo.length;
      });
      state.sweep.points.push({ policy, load, workload, seed, summary: result.summary });
    } catch (e) {
      if (e.message === 'cancelled') cancelled = true;
      else state.sweep.failed.push(`${what}: ${e.message}`);
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

export function renderSweep() {
  const sw = state.sweep;
  if (!sw) return;
  const key = $('#sweep-metric').value;
  const name = $('#sweep-metric').selectedOptions[0].textContent;
  // Each (policy, load) over its workloads and seeds: the mean (the CLI
  // sweep's per-policy figure) and, with more than one run, the spread.
  const stats = (policy, load) => {
    const xs = sw.points.filter((p) => p.policy === policy && p.load === load).map((p) => p.summary[key]);
    return xs.length ? spread(xs) : null;
  };
  const value = (policy, load) => stats(policy, load)?.mean;
  const cell = (st) => {
    if (!st) return '–';
    if (st.n === 1) return fmt(st.mean / HOUR);
    return `${fmt(st.mean / HOUR)}<small class="spread"> ± ${fmt(st.sd / HOUR)} (${fmt(st.min / HOUR)}–${fmt(st.max / HOUR)}, ${st.n} runs)</small>`;
  };
  const seeds = sw.seeds ?? [sw.base.seed];
  const workloads = sw.workloads ?? [sw.base.workload];
  const over = (workloads.length > 1 ? `workloads ${workloads.join(', ')}` : sw.base.workload) +
    (seeds.length > 1 ? `; mean ± sd (min–max) over seeds ${seeds.join(', ')}` : '') +
    (workloads.length > 1 && seeds.length === 1 ? '; mean ± sd (min–max) over the workloads' : '');
  $('#sweep-table').innerHTML = `<tr><th>policy</th>${sw.loads.map((l) => `<th>load × ${l}</th>`).join('')}</tr>` +
    sw.policies.map((policy) => `<tr><td>${esc(policy)}</td>${sw.loads.map((load) => {
      const st = stats(policy, load);
      return `<td data-policy="${esc(policy)}" data-load="${load}"${st ? ` data-mean="${st.mean}" data-sd="${st.sd}" data-n="${st.n}"` : ''}>${cell(st)}</td>`;
    }).join('')}</tr>`).join('') +
    `<caption>${esc(name)} JCT (h) of ${esc(sw.base.label)} (${esc(over)}, cluster ${esc(sw.base.cluster)})</caption>`;
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
