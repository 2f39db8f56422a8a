// Results kept across reloads, in IndexedDB.
import { setStatus } from './util.js';
import { state } from './state.js';

/// The last results (and load sweep) live in IndexedDB, so a reload or a
/// closed tab does not lose them. Rounds for the inspector live in the
/// engine's memory only: restored results say so instead of inspecting.
const DB = { name: 'gpuplan-explorer', store: 'results', key: 'last' };

function openDb() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB.name, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(DB.store);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

async function dbDo(mode, f) {
  const db = await openDb();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(DB.store, mode);
      const req = f(tx.objectStore(DB.store));
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  } finally {
    db.close();
  }
}

export async function saveResults() {
  try {
    const runs = state.runs.map(({ restored, ...r }) => r);
    await dbDo('readwrite', (s) => s.put({ saved_at: Date.now(), runs, sweep: state.sweep ?? null }, DB.key));
    document.body.dataset.saved = String(Date.now());
  } catch (e) {
    // Private windows or a full disk: the results are still on the page.
    console.warn('could not keep the results:', e);
  }
}

/// The results kept by the last visit, if any.
export function loadResults() {
  return dbDo('readonly', (s) => s.get(DB.key));
}

export async function forgetResults() {
  await dbDo('readwrite', (s) => s.delete(DB.key));
  setStatus('Saved results forgotten (the page keeps showing them until it is reloaded).');
}

/// Uploaded files (workload, cluster, variability, Gavel table) per scenario label, kept beside
/// the results so a reload keeps them: links leave them out (they may be
/// large and private), so the page would otherwise come back without them.
const UPLOADS = 'uploads';

export async function saveUploads(list) {
  try {
    const byLabel = {};
    for (const s of list) {
      if (s.upload || s.cluster_upload || s.variability_upload || s.gavel_throughputs_upload) {
        byLabel[s.label] = { upload: s.upload ?? null, cluster_upload: s.cluster_upload ?? null,
          variability_upload: s.variability_upload ?? null, gavel_throughputs_upload: s.gavel_throughputs_upload ?? null };
      }
    }
    await dbDo('readwrite', (st) => st.put(byLabel, UPLOADS));
    document.body.dataset.uploadsSaved = String(Date.now());
  } catch (e) {
    console.warn('could not keep the uploads:', e);
  }
}

/// The uploads kept by the last visit, by scenario label ({} if none).
export async function loadUploads() {
  try {
    return (await dbDo('readonly', (st) => st.get(UPLOADS))) ?? {};
  } catch {
    return {};
  }
}
