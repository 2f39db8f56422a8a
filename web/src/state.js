// The page's one mutable state: the engine's catalog, the worker and its
// requests in flight, the last runs, the load sweep and the drawn charts.
export const state = {
  catalog: null,
  worker: null,
  nextId: 1,
  running: null, // {id, cancel: Int32Array|null, resolve, reject}
  pending: new Map(), // inspect requests by id
  runs: [], // results of the last Run, one per scenario
  charts: [],
};
