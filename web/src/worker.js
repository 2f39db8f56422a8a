// The simulation runs here, off the page's thread, so the page never freezes.
// Protocol (all messages are plain objects):
//   in:  {type: 'run', id, scenario, cancel?: SharedArrayBuffer}   {type: 'inspect', id, runId, index}
//        {type: 'resolve', id, runId, index, options}   {type: 'dump', id, runId}   {type: 'compare', id, a, b, window}
//   out: {type: 'ready', catalog} {type: 'progress', id, round, now_s, done, total, alone, elapsed_ms} {type: 'done', id, result}
//        {type: 'inspected', id, round} (dump: its JSON lines as text) {type: 'error', id, message, fatal?}
//   fatal: the wasm instance trapped (a Rust panic or out of memory); it is
//   unusable from then on, so the page replaces this worker.
import init, { catalog, compare_rounds, dump_rounds, inspect_round, resolve_round, run_scenario, warm_up }
  from '../pkg/gpuplan_wasm.js';

const PROGRESS_EVERY_MS = 100;

async function start() {
  try {
    const t0 = performance.now();
    await init({ module_or_path: new URL('gpuplan_wasm_bg.wasm', import.meta.url) });
    const cat = JSON.parse(catalog());
    postMessage({ type: 'ready', catalog: cat, init_ms: performance.now() - t0 });
    warm_up(); // messages queue meanwhile; the page is already drawn
  } catch (e) {
    postMessage({ type: 'error', id: null, message: `could not load the engine: ${e.message ?? e}` });
  }
}

function run(msg) {
  // With cross-origin isolation the page can flip this flag while we run;
  // otherwise it cancels by terminating this worker.
  const flag = msg.cancel ? new Int32Array(msg.cancel) : null;
  let last = 0;
  const t0 = performance.now();
  const progress = (round, nowS, done, total, alone) => {
    const t = performance.now();
    if (t - last >= PROGRESS_EVERY_MS) {
      last = t;
      postMessage({ type: 'progress', id: msg.id, round, now_s: nowS, done, total, alone, elapsed_ms: t - t0 });
    }
    return !(flag && Atomics.load(flag, 0) === 1);
  };
  try {
    const json = run_scenario(JSON.stringify(msg.scenario), progress);
    postMessage({ type: 'done', id: msg.id, result: json, elapsed_ms: performance.now() - t0 });
  } catch (e) {
    postError(msg.id, e);
  }
}

function postError(id, e) {
  const fatal = e instanceof WebAssembly.RuntimeError;
  postMessage({ type: 'error', id, message: String(e.message ?? e), fatal });
}

// Messages can arrive before the engine is loaded (the page posts a run as
// soon as a restarted worker exists); each waits for `engine` first.
const engine = start();

onmessage = (ev) => {
  engine.then(() => handle(ev.data));
};

function handle(msg) {
  if (msg.type === 'run') run(msg);
  else if (msg.type === 'dump' || msg.type === 'compare') {
    try {
      const out = msg.type === 'dump' ? dump_rounds(msg.runId)
        : JSON.parse(compare_rounds(msg.a, msg.b, msg.window));
      postMessage({ type: 'inspected', id: msg.id, round: out });
    } catch (e) {
      postError(msg.id, e);
    }
  }
  else if (msg.type === 'inspect' || msg.type === 'resolve') {
    try {
      const json = msg.type === 'inspect'
        ? inspect_round(msg.runId, msg.index)
        : resolve_round(msg.runId, msg.index, JSON.stringify(msg.options));
      postMessage({ type: 'inspected', id: msg.id, round: JSON.parse(json) });
    } catch (e) {
      postError(msg.id, e);
    }
  }
}
