// The scenario editor and the share link (#s=...).
import { $, showError } from './util.js';
import { state } from './state.js';
import { fieldHelp, policyHelp } from './help.js';
import { saveUploads } from './store.js';

export const FIELDS = ['label', 'cluster', 'workload', 'load', 'policy', 'p', 'restart_delay_s', 'interval_s',
  'interference', 'interference_slowdown', 'time_limit_s', 'seed', 'variability', 'cross_node_factor', 'placement',
  'sticky', 'sharing', 'type_blind', 'variability_blind', 'queues', 'fairness', 'estimates',
  // Issue 54, item 7: the rest of simulate's flags (under "More settings").
  'exploration_factor', 'restart_weight', 'restart_penalty_s', 'priority_exponent', 'priority_scale_gpu_s',
  'left_out_cost', 'spare_waiting', 'min_runtime_s', 'checkpoint_interval_s', 'restart_charge', 'trace_format',
  'skip_bad_rows', 'duration_jobs', 'shrink_to_fit', 'gavel_gpu_type', 'sharing_pairs', 'variability_draw',
  'max_sim_days', 'run_idle_rounds', 'memory_limit_mb', 'round_log', 'estimate_work', 'estimate_every',
  'estimate_budget_s', 'estimate_no_ranges', 'estimate_spread', 'estimate_skip_steady'];

const BOOLEAN = new Set(['sticky', 'type_blind', 'variability_blind', 'fairness', 'estimates', 'spare_waiting',
  'skip_bad_rows', 'shrink_to_fit', 'run_idle_rounds', 'round_log', 'estimate_no_ranges']);

const NUMERIC = new Set(['load', 'p', 'restart_delay_s', 'interval_s', 'interference_slowdown', 'time_limit_s', 'seed',
  'cross_node_factor', 'sharing', 'left_out_cost', 'max_sim_days', 'estimate_every', 'estimate_budget_s', 'estimate_spread',
  'estimate_skip_steady']);

/// Numbers a flag may leave unset (the CLI's `Option`s): empty means "not
/// given", so the policy's own default applies, and the key stays out of
/// the scenario and its link.
const OPTIONAL = new Set(['exploration_factor', 'restart_weight', 'restart_penalty_s', 'priority_exponent',
  'priority_scale_gpu_s', 'min_runtime_s', 'checkpoint_interval_s', 'memory_limit_mb']);

/// The choice fields whose values the engine's catalog lists (the CLI's
/// value names), with the menu's words for a value where they help.
const CHOICES = {
  interference: {}, variability: { upload: 'uploaded file' }, restart_charge: {}, trace_format: { '': 'detect' },
  duration_jobs: {}, sharing_pairs: {}, variability_draw: {}, estimate_work: {},
};

function scenarioElements() {
  return [...document.querySelectorAll('#scenarios .scenario')];
}

export function addScenario(values) {
  const node = $('#scenario-template').content.firstElementChild.cloneNode(true);
  const wl = node.querySelector('[name=workload]');
  for (const w of state.catalog.workloads) wl.add(new Option(`${w.label} (${w.jobs} jobs)`, w.id));
  wl.add(new Option('Uploaded file', 'upload'));
  const pol = node.querySelector('[name=policy]');
  for (const p of state.catalog.policies) {
    const o = new Option(p, p);
    o.title = policyHelp(state.catalog, p);
    pol.add(o);
  }
  for (const [f, text] of Object.entries(fieldHelp(state.catalog))) node.querySelector(`[name=${f}]`).closest('label').title = text;
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
    help.textContent = `${pol.value}: ${policyHelp(state.catalog, pol.value)}` +
      (takes ? '' : ` (places jobs itself: no placement stage, which only ${state.catalog.placement_policies.join(', ')} take)`);
  };
  pol.addEventListener('change', showPolicy);
  for (const [f, words] of Object.entries(CHOICES)) {
    const sel = node.querySelector(`[name=${f}]`);
    for (const v of state.catalog.choices[f]) sel.add(new Option(words[v] ?? v, v));
  }
  // Keys links and the defaults leave out while they hold the CLI's default.
  const s = { ...state.catalog.omitted_defaults, ...state.catalog.defaults, ...values };
  if (!s.label) s.label = freshLabel();
  for (const f of FIELDS) {
    const el = node.querySelector(`[name=${f}]`);
    if (BOOLEAN.has(f)) el.checked = Boolean(s[f]);
    else el.value = s[f] ?? '';
  }
  showPolicy();
  // A scenario added from another (or restored) keeps its uploaded files.
  node.upload = values.upload ?? null;
  node.clusterUpload = values.cluster_upload ?? null;
  node.variabilityUpload = values.variability_upload ?? null;
  node.gavelUpload = values.gavel_throughputs_upload ?? null;
  const showFiles = () => {
    node.querySelector('.upload-name').textContent = node.upload ? node.upload.name : '';
    node.querySelector('.cluster-upload-name').textContent = node.clusterUpload ? node.clusterUpload.name : '';
    node.querySelector('.variability-upload-name').textContent = node.variabilityUpload ? node.variabilityUpload.name : '';
    node.querySelector('.gavel-upload-name').textContent = node.gavelUpload ? node.gavelUpload.name : '';
    node.querySelector('.gavel-forget').hidden = !node.gavelUpload;
  };
  showFiles();
  // Each upload control: the file kept on the node under `key`, its field (if any) set to `upload`.
  const onUpload = (input, key, fieldName) => node.querySelector(`[name=${input}]`).addEventListener('change', async (ev) => {
    const file = ev.target.files[0];
    if (!file) return;
    node[key] = { name: file.name, text: await file.text() };
    if (fieldName) node.querySelector(`[name=${fieldName}]`).value = 'upload';
    showFiles();
    onEdit();
    saveUploads(scenarios());
  });
  // A variability file (class,node,gpu,slowdown), as --variability FILE.
  onUpload('variability_file', 'variabilityUpload', 'variability');
  // A cluster file (name,gpus,gpu_type[,count]; `gpuplan trace import-slurm` writes one).
  onUpload('cluster_file', 'clusterUpload', 'cluster');
  onUpload('upload', 'upload', 'workload');
  // Gavel's throughput table, as --gavel-throughputs FILE (× forgets it: the bundled one again).
  onUpload('gavel_throughputs_file', 'gavelUpload', null);
  node.querySelector('.gavel-forget').addEventListener('click', () => {
    node.gavelUpload = null;
    node.querySelector('[name=gavel_throughputs_file]').value = '';
    showFiles();
    onEdit();
    saveUploads(scenarios());
  });
  node.querySelector('.remove').addEventListener('click', () => {
    if (scenarioElements().length > 1) node.remove();
    onEdit();
    saveUploads(scenarios());
  });
  // A renamed scenario keeps its files under its new label.
  node.querySelector('[name=label]').addEventListener('change', () => saveUploads(scenarios()));
  node.addEventListener('input', onEdit);
  $('#scenarios').append(node);
  onEdit();
  if (node.upload || node.clusterUpload || node.variabilityUpload || node.gavelUpload) saveUploads(scenarios());
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
    if (OPTIONAL.has(f)) {
      if (el.value.trim() !== '') s[f] = Number(el.value);
      continue;
    }
    s[f] = BOOLEAN.has(f) ? el.checked : NUMERIC.has(f) ? Number(el.value) : el.value;
  }
  // A policy without the placement stage: the controls are off, read as default.
  if (node.querySelector('[name=placement]').disabled) {
    s.placement = 'default';
    s.sticky = false;
  }
  if (s.workload === 'upload' && node.upload) s.upload = node.upload;
  if (s.cluster === 'upload' && node.clusterUpload) s.cluster_upload = node.clusterUpload;
  if (s.variability === 'upload' && node.variabilityUpload) s.variability_upload = node.variabilityUpload;
  if (node.gavelUpload) s.gavel_throughputs_upload = node.gavelUpload;
  return s;
}

export function scenarios() {
  return scenarioElements().map(readScenario);
}

export function encodeState() {
  // Uploaded files stay out of links: they may be large and private.
  const list = scenarios().map(({ upload, cluster_upload: _, variability_upload: __, gavel_throughputs_upload: ___, ...rest }) => rest);
  return '#s=' + encodeURIComponent(JSON.stringify(list));
}

/// Scenarios from the share link; a link that cannot be read says so
/// (it used to fall back to the defaults silently).
export function decodeState() {
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

/// A scenario's own checks, before the engine sees it: messages the engine
/// would give as a JSON parser error (a negative seed is not a u64).
export function precheck(s) {
  if (!Number.isInteger(s.seed) || s.seed < 0) return `seed must be a whole number >= 0, got ${s.seed}`;
  // Whole-number flags (u32, u64 in the engine): a JSON parser error otherwise.
  for (const [f, name] of [['exploration_factor', 'exploration factor'], ['memory_limit_mb', 'memory limit'],
    ['estimate_every', 'estimate every'], ['estimate_skip_steady', 'estimate skip steady']]) {
    if (s[f] !== undefined && (!Number.isInteger(s[f]) || s[f] < 0)) return `${name} must be a whole number >= 0, got ${s[f]}`;
  }
  return null;
}
