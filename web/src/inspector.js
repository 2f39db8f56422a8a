// The round inspector: one kept round, its jobs and plan, and the same
// round solved again by another planner.
import { $, HOUR, showError, esc } from './util.js';
import { state } from './state.js';
import { inspectInWorker } from './engine.js';
import { goodputNote } from './help.js';

const RESTORED_NOTE = 'These results were kept from an earlier visit; their rounds lived in the engine\'s memory and are gone. ' +
  'Run the scenarios again to inspect rounds.';

export async function inspect() {
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

export async function resolveRound() {
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
    `<div class="note">${goodputNote(state.catalog)}</div><div class="note">${HARDWARE_NOTE}</div>` + sharingBlock(d);
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
