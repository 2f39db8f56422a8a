// The bridge to the engine in worker.js: runs and round inspections as
// promises, cancelling, and a fresh worker when the wasm instance traps.
import { state } from './state.js';

export function startWorker() {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL('worker.js', import.meta.url), { type: 'module' });
    w.onmessage = (ev) => {
      const m = ev.data;
      if (m.type === 'ready') {
        resolve(m.catalog);
        return;
      }
      if (m.type === 'error' && m.id === null) {
        reject(new Error(m.message));
        return;
      }
      onWorkerMessage(m);
    };
    let started = false;
    w.onerror = (e) => {
      if (!started) reject(new Error(e.message || 'worker failed to start'));
      else engineCrashed(e.message || 'the engine stopped');
    };
    const ready = resolve;
    resolve = (cat) => {
      started = true;
      ready(cat);
    };
    state.worker = w;
  });
}

/// A trapped wasm instance keeps its broken state (held borrows, a lost
/// stack pointer), so every later call would fail too: throw the worker
/// away, start a fresh one, and fail only what was in flight.
function engineCrashed(message) {
  state.worker.terminate();
  const err = new Error(`The engine crashed (${message}) and was restarted; the next run starts afresh.`);
  const r = state.running;
  state.running = null;
  for (const p of state.pending.values()) p.reject(err);
  state.pending.clear();
  state.restarting = startWorker().finally(() => { state.restarting = null; });
  r?.reject(err);
}

function onWorkerMessage(m) {
  if (m.type === 'error' && m.fatal) {
    engineCrashed(m.message);
    return;
  }
  const r = state.running;
  if (m.type === 'progress' && r && m.id === r.id) {
    r.onProgress(m);
  } else if (m.type === 'done' && r && m.id === r.id) {
    state.running = null;
    r.resolve({ result: JSON.parse(m.result), elapsed_ms: m.elapsed_ms });
  } else if (m.type === 'error' && r && m.id === r.id) {
    state.running = null;
    r.reject(new Error(m.message));
  } else if (m.type === 'inspected' || m.type === 'error') {
    const p = state.pending.get(m.id);
    if (!p) return;
    state.pending.delete(m.id);
    if (m.type === 'inspected') p.resolve(m.round);
    else p.reject(new Error(m.message));
  }
}

export async function runInWorker(scenario, onProgress) {
  if (state.restarting) await state.restarting;
  return new Promise((resolve, reject) => {
    const id = state.nextId++;
    const sab = globalThis.crossOriginIsolated ? new SharedArrayBuffer(4) : null;
    state.running = { id, cancel: sab ? new Int32Array(sab) : null, resolve, reject, onProgress };
    state.worker.postMessage({ type: 'run', id, scenario, cancel: sab });
  });
}

export async function inspectInWorker(runId, index, options = null) {
  if (state.restarting) await state.restarting;
  return new Promise((resolve, reject) => {
    const id = state.nextId++;
    state.pending.set(id, { resolve, reject });
    const type = options ? 'resolve' : 'inspect';
    state.worker.postMessage({ type, id, runId, index, options });
  });
}

export async function cancelRun() {
  const r = state.running;
  if (!r) return;
  if (r.cancel) {
    Atomics.store(r.cancel, 0, 1); // the worker stops after the current round
    return;
  }
  // No shared memory here: stop the worker outright and start a fresh one.
  state.running = null;
  state.worker.terminate();
  r.reject(new Error('cancelled'));
  await startWorker();
}

/// Any other request of the worker (`dump`, `compare`): its answer as a promise.
export async function askWorker(type, fields) {
  if (state.restarting) await state.restarting;
  return new Promise((resolve, reject) => {
    const id = state.nextId++;
    state.pending.set(id, { resolve, reject });
    state.worker.postMessage({ type, id, ...fields });
  });
}
