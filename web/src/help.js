// What each field and policy means. Field help is the page's own; every
// fact about planners (names, help, which place or plan for goodput) is
// read from the engine's catalog, so a planner added to the registry is
// explained here with no edit.

/// One line for each field, shown where the field is (its tooltip) and in
/// the help box, so no field needs the source to be understood. The
/// policies a line names come from the catalog.
export function fieldHelp(catalog) {
  return {
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
    placement: `How fixed-size policies (${catalog.placement_policies.join(', ')}) pick GPUs, as gpuplan simulate --placement: ` +
      'default = the policy\'s own (running jobs kept); packed = fewest nodes; random; pm-first = fastest GPUs for the job\'s class; pal = PAL\'s least expected slowdown; mip = PAL\'s cost minimised over all jobs of the round at once (pm-first, pal and mip need GPU variability). Other policies place jobs themselves.',
    sticky: 'With a placement: running jobs keep their GPUs instead of being placed afresh every round (--sticky).',
    type_blind: 'Goodput planners value every GPU type with the job\'s one model, as Pollux does (--type-blind); jobs still run at their true per-type speed. Compare pollux-ga blind with sia on a mixed cluster such as 6x4:t4+3x8:rtx2080ti+2x8:a100.',
    variability_blind: 'With GPU variability: planners do not see per-GPU speeds (--variability-blind), while the simulator still charges them; compare with the aware run to see what seeing variability is worth.',
    sharing: `Most jobs one GPU may hold (--sharing K; 1 = none). ${catalog.sharing_policies.join(', ')} decide who shares; ` +
      'shared jobs run at Gavel\'s measured co-located speeds where their models were measured, else its fitted curve ' +
      '(as the CLI). The round inspector lists who shares with whom; the Gantt splits each GPU into that many lanes.',
    fairness: 'Finish-time fairness (as gpuplan simulate --analysis): after the run, every job is simulated once more alone ' +
      '(fifo, same cluster, its requested GPUs) and ρ = JCT / that isolated JCT is shown. Off by default: it runs every job ' +
      'again. A job that cannot run alone (it asks more GPUs than the cluster or its queue gives) is named and left out; ' +
      'the run\'s own results stand.',
    estimates: 'When will a job start? As gpuplan simulate --estimates: at each job\'s submission the planner is run forward from that ' +
      'moment (declared work, every job, with ranges) to predict its start and finish; the scatter plots each predicted start against ' +
      'the actual one (on the diagonal: exact), with the median and p90 error. Off by default: it simulates once more.',
  };
}

/// The round inspector's re-solve control.
export const RESOLVE_HELP = 'Solves the shown round again with another planner (on the same jobs, GPUs and parameters) and ' +
  'shows its plan, objective and bound beside the one the run used; the run itself is unchanged. Hover a planner for what it does.';

/// A policy's help: the registry's description, and the parameters it sets
/// differently from Pollux's.
export function policyHelp(catalog, name) {
  const info = catalog.policy_info.find((p) => p.name === name);
  if (!info) return '';
  const params = Object.entries(info.params).map(([k, v]) => `${k} ${v}`);
  return plainWords(info.description) + (params.length ? ` (its parameters: ${params.join(', ')})` : '');
}

/// A registry description as a page reader needs it: the project's issue
/// numbers mean nothing to them ("before issue 36" is "in its earlier version").
export function plainWords(text) {
  return text.replace(/\bbefore issue \d+/g, 'in its earlier version').replace(/\s*\(issue \d+\)/g, '')
    .replace(/\bissue \d+/g, 'an earlier version');
}

/// What the inspector's value and objective are, naming the planners that
/// maximise them (from the catalog).
export function goodputNote(catalog) {
  const names = (goodput) => catalog.policy_info.filter((p) => p.goodput === goodput).map((p) => p.name).join(', ');
  return 'value: the job\'s term in the objective, its speedup over the fair share (× a restart penalty if it moves); ' +
    `objective: their generalized mean with power p. Only goodput planners (${names(true)}) maximise it; ` +
    `the others (${names(false)}) allocate by other rules, so their objective can sit near 0.`;
}

export const FIELD_NAMES = { cluster: 'cluster', workload: 'workload', load: 'load ×', policy: 'policy', p: 'p',
  restart_delay_s: 'restart delay', interval_s: 'interval', interference: 'interference',
  interference_slowdown: 'slowdown', time_limit_s: 'time limit', seed: 'seed', variability: 'variability',
  cross_node_factor: 'cross-node L', placement: 'placement', sticky: 'sticky', sharing: 'jobs per GPU',
  type_blind: 'type-blind', variability_blind: 'variability-blind', queues: 'queues',
  fairness: 'fairness (alone)', estimates: 'estimates' };
