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
    exploration_factor: 'Pollux\'s exploration cap for goodput planners: a job gets at most this many times the most GPUs it has run on ' +
      '(--exploration-factor; empty = the policy\'s own, 2 for Pollux).',
    restart_weight: 'Times its duration a restart is charged in goodput planners\' restart factor (--restart-weight; empty = the ' +
      'policy\'s own: 1 for Pollux, 2 for gpuplan-mip).',
    restart_penalty_s: 'δ of the restart factor (age − δ·restarts)/(age + δ) in goodput planners\' objective (--restart-penalty; ' +
      'empty = the restart delay, what a restart really costs).',
    priority_exponent: 'Attained-service priority of goodput planners: each job\'s value is multiplied by (1 + attained GPU-s / ' +
      'priority scale)^this (--priority-exponent; 0 = off, Pollux\'s objective; empty = the policy\'s own).',
    priority_scale_gpu_s: 'GPU-seconds of service at which the priority factor reaches 2^exponent (--priority-scale; empty = the policy\'s own).',
    left_out_cost: 'Sia\'s valuation (--left-out-cost): speedups over each job\'s least configuration, and a job left without GPUs costs ' +
      'this in Σ (v+ε)^p (Sia: 1.1, with p = -0.5). Needs p below 0. 0 = off, Pollux\'s.',
    spare_waiting: 'Charge the restart factor only to jobs that hold GPUs, Sia\'s rule (--spare-waiting); by default a waiting job\'s start is charged too.',
    min_runtime_s: 'Least seconds a job holds its GPUs before a round may shrink, move or preempt it (--min-runtime; empty = 0, none).',
    checkpoint_interval_s: 'Seconds of run time between checkpoints where the workload gives none (--checkpoint-interval): a restart ' +
      'then also loses the work since the last checkpoint. Empty = jobs checkpoint when stopped.',
    restart_charge: 'What goodput planners charge a restart of a checkpointing job (--restart-charge): its penalty plus the work since ' +
      'its last checkpoint, or the penalty alone (fixed).',
    trace_format: 'The workload file\'s format (--trace-format); detect = told from the first line, as the CLI does.',
    skip_bad_rows: 'Skip and count malformed rows of the workload instead of failing (--skip-bad-rows); the results name how many and the first.',
    duration_jobs: 'Jobs with a duration and no application (--duration-jobs): rigid = fixed throughput on the trace\'s GPUs; pollux = ' +
      'Pollux\'s mapping to an application (drawn by the seed).',
    shrink_to_fit: 'Shrink a job that needs more GPUs than the cluster\'s largest GPU type to that size, its duration growing in ' +
      'proportion, instead of refusing the run (--shrink-to-fit); the results name the jobs shrunk.',
    gavel_gpu_type: 'GPU type whose Gavel throughput turns a Gavel trace job\'s steps into a duration, and whose rows describe rigid ' +
      'jobs when sharing (--gavel-gpu-type). Gavel traces are read with the bundled throughput table.',
    sharing_pairs: 'With jobs per GPU > 1: all = any two jobs whose memories fit; measured = only pairs whose co-located speeds Gavel ' +
      'measured, Lucid\'s rule (--sharing-pairs).',
    variability_draw: 'With GPU variability (--variability-draw): node = whole measured nodes (slow GPUs stay together); pal = each GPU ' +
      'one measured run, as PAL\'s simulator. pal needs an uploaded file here (the page does not bundle the sets\' runs: upload ' +
      'traces/pal/variability/runs/NAME.csv for the CLI\'s bundled draw).',
    max_sim_days: 'Fail if jobs still run this many simulated days after the last arrival (--max-sim-days).',
    run_idle_rounds: 'Simulate rounds with no job in the system instead of skipping them (--run-idle-rounds; same results, slower).',
    memory_limit_mb: 'Most memory a round\'s MIP model may take, MiB; a larger one falls back to greedy, marked (--memory-limit; empty ' +
      'or 0 = none here; the CLI\'s default is half the machine\'s memory).',
    round_log: 'Keep one line per round of each job\'s GPUs, nodes, batch size, goodput and restarts (--round-log), to download and ' +
      'to compare with another scenario\'s or a file (compare-rounds) under the results.',
    estimate_work: 'With Estimates: what the estimate knows of each job\'s total work (--estimate-work): declared = its true total; ' +
      'history = predicted from the jobs finished so far.',
    estimate_every: 'With Estimates: estimate every Nth submitted job (--estimate-every; 1 = all), to bound the cost.',
    estimate_budget_s: 'With Estimates: wall-clock seconds each estimate may take (--estimate-budget); this page runs slower than the ' +
      'CLI, so a tight budget cuts more estimates short here.',
    estimate_no_ranges: 'With Estimates: skip the low/high runs, no ranges (--estimate-no-ranges; a third of the cost).',
    estimate_spread: 'With Estimates: how far the fitted models\' rates may be off, a fraction (--estimate-spread): the ranges\' low run ' +
      'is that much faster, the high run slower.',
    estimate_skip_steady: 'With Estimates: after a simulated round that changes nothing, keep its plan up to this many rounds without ' +
      'planning, unless a job finishes (--estimate-skip-steady; 0 = plan every round).',
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
  fairness: 'fairness (alone)', estimates: 'estimates', exploration_factor: 'exploration factor',
  restart_weight: 'restart weight', restart_penalty_s: 'restart penalty', priority_exponent: 'priority exponent',
  priority_scale_gpu_s: 'priority scale', left_out_cost: 'left-out cost', spare_waiting: 'spare waiting',
  min_runtime_s: 'min runtime', checkpoint_interval_s: 'checkpoint interval', restart_charge: 'restart charge',
  trace_format: 'format', skip_bad_rows: 'skip bad rows', duration_jobs: 'duration jobs', shrink_to_fit: 'shrink to fit',
  gavel_gpu_type: 'Gavel GPU type', sharing_pairs: 'sharing pairs', variability_draw: 'variability draw',
  max_sim_days: 'max sim days', run_idle_rounds: 'idle rounds', memory_limit_mb: 'memory limit', round_log: 'round log',
  estimate_work: 'estimate work', estimate_every: 'estimate every', estimate_budget_s: 'estimate budget',
  estimate_no_ranges: 'no ranges', estimate_spread: 'estimate spread', estimate_skip_steady: 'skip steady rounds' };
