// A run's rounds as files (simulate --dump-rounds, --round-log) and two
// round logs compared (gpuplan compare-rounds), under the results.
import { $, esc, fmt, HOUR } from './util.js';
import { download } from './export.js';
import { state } from './state.js';
import { askWorker } from './engine.js';

function chosenRun(sel) {
  return state.runs[Number($(sel).value)];
}

/// A run's round log as JSON lines, as `simulate --round-log` writes it.
export function roundLogText(run) {
  return (run.round_log ?? []).map((l) => JSON.stringify(l)).join('\n') + ((run.round_log ?? []).length ? '\n' : '');
}

function say(text) {
  $('#compare-out').innerHTML = `<p class="note">${esc(text)}</p>`;
}

/// Every round's input (line k = the CLI's round-0000k.json).
export async function exportDumpRounds() {
  const r = chosenRun('#rounds-run');
  if (!r) return;
  if (r.restored) {
    say('The round inputs are kept in the engine only: run the scenarios again to download them.');
    return;
  }
  try {
    const text = await askWorker('dump', { runId: r.run_id });
    download(`${r.scenario.label}-rounds.jsonl`, text, 'application/x-ndjson');
  } catch (e) {
    say(e.message);
  }
}

export function exportRoundLog() {
  const r = chosenRun('#rounds-run');
  if (!r) return;
  if (!r.round_log?.length) {
    say(`Scenario ${r.scenario.label} kept no round log: tick "Round log" under its more settings and run it again.`);
    return;
  }
  download(`${r.scenario.label}-round-log.jsonl`, roundLogText(r), 'application/x-ndjson');
}

let uploaded = null;

export async function pickCompareUpload(ev) {
  const file = ev.target.files[0];
  uploaded = file ? { name: file.name, text: await file.text() } : null;
  $('#compare-upload-name').textContent = uploaded ? uploaded.name : '';
}

/// Two logs side by side: a run's against another run's or an uploaded
/// file (e.g. the Pollux artifact's, scripts/pollux-artifact-rounds.py).
export async function compareRounds() {
  const a = chosenRun('#compare-a');
  const b = uploaded ? null : chosenRun('#compare-b');
  const window = Number($('#compare-window').value);
  if (!Number.isInteger(window) || window < 0) {
    say(`window must be a whole number >= 0, got ${$('#compare-window').value}`);
    return;
  }
  const missing = [a, b].filter((r) => r && !r.round_log?.length).map((r) => r.scenario.label);
  if (missing.length) {
    say(`No round log in ${missing.join(', ')}: tick "Round log" under the scenario's more settings and run again.`);
    return;
  }
  const names = [a.scenario.label, uploaded ? uploaded.name : b.scenario.label];
  try {
    const c = await askWorker('compare', { a: roundLogText(a), b: uploaded ? uploaded.text : roundLogText(b), window });
    state.comparison = c;
    renderComparison(c, names);
  } catch (e) {
    say(e.message);
  }
}

function renderComparison(c, [x, y]) {
  const t = (v) => (v == null ? 'never' : `${fmt(v)} s`);
  const pair = (v, f = fmt) => `<td>${f(v[0])}</td><td>${f(v[1])}</td>`;
  const rows = [...c.windows, c.total].map((w, i) => `<tr><td>${i === c.windows.length ? 'whole run' : `${fmt(w.from_s / HOUR)}–${fmt(w.to_s / HOUR)} h`}</td>` +
    pair(w.active) + pair(w.running) + pair(w.gpus) + pair(w.restarts, String) + pair(w.finished, String) + pair(w.fitness) + '</tr>');
  const apps = Object.entries(c.gpus_per_running_job).map(([app, g]) => {
    const w = c.waiting_rounds[app] ?? [0, 0];
    return `<tr><td>${esc(app)}</td>${pair(g)}${pair(w, String)}</tr>`;
  });
  const two = `<th>${esc(x)}</th><th>${esc(y)}</th>`;
  $('#compare-out').innerHTML = `<p class="compare-head">rounds in both: <b data-key="common_rounds">${c.common_rounds}</b>; ` +
    `first round a job holds different GPUs: ${t(c.first_gpu_difference_s)}; first round a job finished in one only: ` +
    `${t(c.first_finish_difference_s)}; same-shape (job, round) pairs: ${c.same_shape_pairs}, largest goodput difference ` +
    `${c.same_shape_max_goodput_diff.toExponential(2)}; avg JCT of jobs finished in both: ${esc(x)} ${fmt(c.avg_jct_s[0])} s, ` +
    `${esc(y)} ${fmt(c.avg_jct_s[1])} s</p>` +
    `<table><tr><th>stretch</th><th colspan="2">active</th><th colspan="2">running</th><th colspan="2">GPUs</th>` +
    `<th colspan="2">restarts</th><th colspan="2">finished</th><th colspan="2">fitness</th></tr>` +
    `<tr><th></th>${two.repeat(6)}</tr>${rows.join('')}</table>` +
    `<table><tr><th>application</th><th colspan="2">GPUs per running job</th><th colspan="2">waiting rounds</th></tr>` +
    `<tr><th></th>${two.repeat(2)}</tr>${apps.join('')}</table>`;
}

/// The comparison as `gpuplan compare-rounds --format json` prints it.
export function exportComparison() {
  if (!state.comparison) {
    say('Compare two round logs first.');
    return;
  }
  download('compare-rounds.json', JSON.stringify(state.comparison, null, 2) + '\n', 'application/json');
}
