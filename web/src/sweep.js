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
      // The sweep plots JCT only: no fairness or estimates runs per point.
      const { result } = await runInWorker({ ...base, policy, load, label: `${policy} ×${load}`, fairness: false, estimates: false }, (p) => {
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

export function renderSweep() {
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
