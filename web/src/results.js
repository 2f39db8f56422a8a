// Running the scenarios, and the summary and per-application tables of
// their results.
import { $, COLORS, HOUR, setStatus, showError, hours, fmt, esc, deltaText } from './util.js';
import { state } from './state.js';
import { runInWorker } from './engine.js';
import { FIELD_NAMES } from './help.js';
import { FIELDS, scenarios, precheck } from './scenario.js';
import { renderCharts, fillJobPick } from './charts.js';
import { saveResults } from './store.js';
import { inspect } from './inspector.js';

/// Runs every scenario in turn. One that fails is named and skipped; the
/// others' results are kept, and so are those finished before a Cancel.
export async function runAll() {
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

/// The queue names a queues file declares (`name = "..."`), in order.
export function queueNames(toml) {
  return [...(toml ?? '').matchAll(/^\s*name\s*=\s*["']([^"']*)["']/gm)].map((m) => m[1]);
}

/// A scenario field's value as a what-if column names it: queues by their
/// names (the file's text would not fit), an absent value as none.
function fieldValue(scenario, f) {
  const v = scenario[f] ?? state.catalog?.omitted_defaults?.[f];
  if (f === 'queues') {
    const names = queueNames(v);
    return names.length ? names.join(', ') : 'none';
  }
  return v ?? 'none';
}

/// Under jobs per GPU > 1: whether this run's planner shares at all, and
/// how much it did, so an unshared run is never silently taken for one.
function sharingNote(r) {
  const k = r.scenario.sharing ?? 1;
  if (k <= 1) return '';
  const sharers = state.catalog?.sharing_policies ?? [];
  const text = !sharers.includes(r.scenario.policy)
    ? `jobs per GPU ${k} has no effect: ${r.scenario.policy} never shares GPUs (those that do: ${sharers.join(', ')})`
    : `jobs per GPU ${k}: ${fmt(r.summary.gpu_shared)} of GPU-time shared` +
      (r.summary.gpu_shared > 0 ? '' : ' (no job shared a GPU in this run)');
  return `<br><small class="sharing-note">${esc(text)}</small>`;
}

/// Which MIP solver ran the run's rounds: the page has microlp only (HiGHS
/// is C++ and does not build for the browser), so a MIP policy's plans may
/// differ slightly from `gpuplan simulate`'s, which solves with HiGHS.
function solverNote(r) {
  const solvers = Object.entries(r.solvers ?? {});
  if (!solvers.length) return '';
  const used = solvers.map(([name, n]) => `${name} (${n} round${n === 1 ? '' : 's'})`).join(', ');
  const text = `MIP solved by ${used} here; gpuplan simulate uses HiGHS, so results may differ slightly`;
  const more = 'Where a round has several optimal plans the two solvers may pick different ones. docs/explorer.md ("MIP solver") ' +
    'gives the measured difference; the CLI\'s mip-exact-microlp (the same planner with microlp) reproduces the page.';
  return `<br><small class="solver-note" title="${esc(more)}">${esc(text)}</small>`;
}

/// What the CLI would print on stderr about the inputs (rows skipped, jobs
/// shrunk), per scenario.
function renderNotes() {
  const notes = state.runs.flatMap((r) => (r.notes ?? []).map((n) => `${r.scenario.label}: ${n}`));
  $('#run-notes').hidden = !notes.length;
  $('#run-notes').textContent = notes.join('\n');
}

function renderSummary() {
  const t = $('#summary');
  const runs = state.runs;
  // Each what-if column names what it changes against the first scenario.
  // A key the run's scenario leaves out holds its default (the catalog's).
  const value = (r, f) => r.scenario[f] ?? state.catalog?.omitted_defaults?.[f] ?? '';
  const differs = (r) => FIELDS.filter((f) => f !== 'label' && value(r, f) !== value(runs[0], f))
    .map((f) => `${FIELD_NAMES[f] ?? f} ${fieldValue(r.scenario, f)}`);
  const head = `<tr><th>metric</th>${runs.map((r, i) => {
    const what = i === 0 ? 'baseline' : (differs(r).join(', ') || 'same settings');
    return `<th style="color:${COLORS[i % COLORS.length]}">${esc(r.scenario.label)}: <span class="differs">${esc(what)}</span>` +
      `<br><small>${esc(r.summary.policy)} · ${esc(r.summary.workload)} · ${r.total_gpus} GPUs</small>` +
      `${sharingNote(r)}${solverNote(r)}</th>`;
  }).join('')}</tr>`;
  const rows = METRICS.map(([key, name, get, lowerBetter, help]) => {
    const base = get(runs[0]);
    const cells = runs.map((r, i) => {
      const v = get(r);
      let cls = '';
      let delta = '';
      if (i > 0 && v != null && base != null && base !== 0 && lowerBetter !== null) {
        const d = (v - base) / Math.abs(base);
        delta = `<span class="delta">${deltaText(v, base)} vs ${esc(runs[0].scenario.label)}</span>`;
        if (Math.abs(d) > 1e-9) cls = (d < 0) === lowerBetter ? 'better' : 'worse';
      }
      return `<td class="${cls}" data-key="${key}">${fmt(v)}${delta}</td>`;
    });
    const title = key.startsWith('rho') ? RHO_HELP + (runs[0].analysis?.fairness?.isolated ?? '') : help;
    return `<tr><th${title ? ` title="${esc(title)}"` : ''}>${name}</th>${cells.join('')}</tr>`;
  });
  t.innerHTML = head + rows.join('');
  renderNotes();
  const f = runs[0].analysis?.fairness;
  const leftOut = runs.filter((r) => r.analysis?.left_out?.length).map((r) =>
    `${r.scenario.label}: ${r.analysis.left_out.map((j) => `${j.name} (${j.reason})`).join('; ')}`);
  $('#fairness-note').textContent = (f ? `${RHO_HELP}Here "alone" is the ${f.isolated}. ` +
    'ρ > 1: the job finished later than it would have alone; ρ < 1: sooner (an adaptive policy gave it more GPUs than it asked for).'
    : runs.some((r) => r.scenario.fairness) ? '' : 'Finish-time fairness (ρ) is off: tick "Fairness (each job alone)" to compute it.') +
    (leftOut.length ? ` Left out of the fairness figures, as they cannot run alone: ${leftOut.join(' | ')}.` : '');
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
  renderPerQueue();
}

/// Under queues: each scenario's rows per queue (as `simulate --queues`).
function renderPerQueue() {
  const runs = state.runs.filter((r) => r.queues?.length);
  $('#per-queue-head').hidden = $('#per-queue').hidden = !runs.length;
  if (!runs.length) return;
  const head = '<tr><th>scenario</th><th>queue</th><th>guarantee</th><th>jobs</th><th>avg JCT (h)</th><th>p99 JCT (h)</th>' +
    '<th>GPU-h</th><th>borrowed (GPU-h)</th><th>shortfall (GPU-h)</th></tr>';
  const rows = runs.flatMap((r) => r.queues.map((q) => `<tr><td>${esc(r.scenario.label)}: ${esc(r.summary.policy)}</td>` +
    `<td>${esc(q.queue)}</td><td>${q.guarantee}</td><td>${q.jobs}</td><td data-queue="${esc(q.queue)}">${fmt(q.avg_jct_s / HOUR)}</td>` +
    `<td>${fmt(q.p99_jct_s / HOUR)}</td><td>${fmt(q.gpu_hours)}</td><td>${fmt(q.borrowed_gpu_s / HOUR)}</td>` +
    `<td>${fmt(q.shortfall_gpu_s / HOUR)}</td></tr>`));
  $('#per-queue').innerHTML = head + rows.join('');
}

function fillRunSelects() {
  for (const sel of [$('#gantt-run'), $('#inspect-run'), $('#rounds-run'), $('#compare-a'), $('#compare-b')]) {
    sel.innerHTML = '';
    state.runs.forEach((r, i) => sel.add(new Option(`${r.scenario.label}: ${r.summary.policy}`, String(i))));
  }
}

export function renderResults() {
  $('#results').hidden = false;
  $('#inspector').hidden = false;
  fillRunSelects();
  if (state.runs.length > 1) $('#compare-b').value = '1';
  fillJobPick();
  renderSummary();
  renderCharts();
  const r = state.runs[0];
  $('#inspect-index').value = Math.floor(r.rounds.length / 2);
  inspect();
}
