// The explorer page: scenario editor, results, comparison, round inspector.
// All simulation happens in worker.js; this thread only draws. This module
// wires the page's controls to the modules beside it.
import { $, setStatus, showError, esc } from './util.js';
import { state } from './state.js';
import { startWorker, cancelRun } from './engine.js';
import { fieldHelp, policyHelp, FIELD_NAMES, RESOLVE_HELP } from './help.js';
import { addScenario, scenarios, encodeState, decodeState } from './scenario.js';
import { runAll, renderResults } from './results.js';
import { renderCharts, fillJobPick, renderJobHistory, renderGantt } from './charts.js';
import { runSweep, renderSweep } from './sweep.js';
import { loadResults, forgetResults, loadUploads } from './store.js';
import { inspect, resolveRound } from './inspector.js';
import { addChartTools, exportJson, exportJobsCsv, exportRoundsCsv } from './export.js';
import { exportDumpRounds, exportRoundLog, compareRounds, pickCompareUpload, exportComparison } from './rounds.js';

/// Shows the results (and sweep) kept by the last visit, if any.
async function restoreResults() {
  let saved;
  try {
    saved = await loadResults();
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
  for (const [f, text] of Object.entries(fieldHelp(state.catalog))) {
    const li = document.createElement('li');
    li.innerHTML = `<b>${esc(FIELD_NAMES[f])}</b>: ${esc(text)}`;
    $('#field-help').append(li);
  }
  const { nodes, gpus, jobs } = state.catalog.limits;
  $('#limits').textContent = `The browser takes at most ${nodes} nodes, ${gpus} GPUs and ${jobs} jobs ` +
    '(it keeps every round for the inspector, in at most 4 GiB); the CLI has no such limit.';
  const saved = decodeState();
  // Uploaded files are kept in IndexedDB by scenario label (never in links).
  const uploads = await loadUploads();
  for (const s of saved ?? [{}]) {
    const kept = uploads[s.label ?? 'A'];
    addScenario(kept ? { ...s, upload: s.workload === 'upload' ? kept.upload : null,
      cluster_upload: s.cluster === 'upload' ? kept.cluster_upload : null,
      variability_upload: s.variability === 'upload' ? kept.variability_upload : null,
      gavel_throughputs_upload: kept.gavel_throughputs_upload ?? null } : s);
  }
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
  $('#export-dump-rounds').addEventListener('click', exportDumpRounds);
  $('#export-round-log').addEventListener('click', exportRoundLog);
  $('#compare-upload').addEventListener('change', pickCompareUpload);
  $('#compare-rounds').addEventListener('click', compareRounds);
  $('#export-comparison').addEventListener('click', exportComparison);
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
  for (const p of state.catalog.policies) {
    const o = new Option(p, p);
    o.title = policyHelp(state.catalog, p);
    $('#resolve-planner').add(o);
  }
  const showResolveHelp = () => {
    const p = $('#resolve-planner').value;
    $('#resolve-help').textContent = `${p}: ${policyHelp(state.catalog, p)}`;
  };
  $('#resolve-planner').closest('label').title = RESOLVE_HELP;
  $('#resolve-planner').addEventListener('change', showResolveHelp);
  $('#resolve-planner').value = state.catalog.resolve_planner;
  showResolveHelp();
  $('#resolve').addEventListener('click', resolveRound);
  $('#inspect-index').addEventListener('change', inspect);
  $('#inspect-slider').addEventListener('input', () => {
    $('#inspect-index').value = $('#inspect-slider').value;
    inspect();
  });
  for (const p of state.catalog.policies) {
    const l = document.createElement('label');
    l.title = policyHelp(state.catalog, p);
    l.innerHTML = `<input type="checkbox" value="${esc(p)}"${state.catalog.sweep_policies.includes(p) ? ' checked' : ''}> ${esc(p)}`;
    $('#sweep-policies').append(l);
  }
  for (const w of state.catalog.workloads) $('#sweep-workloads').add(new Option(w.label, w.id));
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
