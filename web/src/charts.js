// The result charts (uPlot): JCT CDF, allocation, goodput, planner time,
// the Gantt per node and one job's history; a click opens the inspector.
import uPlot from 'uplot';
import { $, COLORS, HOUR, fmt, esc } from './util.js';
import { state } from './state.js';
import { inspect } from './inspector.js';

/// The chart's width: its box's, with no minimum beyond a readable 240 px,
/// so a phone (390 px) shows whole charts and their buttons.
export function chartWidth(el) {
  return Math.max(240, el.clientWidth - 12);
}

/// Drag across a chart to zoom its time axis; a move under 5 px is a click,
/// which uPlot would otherwise swallow.
export const CURSOR = { drag: { x: true, y: false, dist: 5, click: () => {} } };

function mkChart(el, opts, data) {
  el.innerHTML = '';
  const c = new uPlot({ width: chartWidth(el), height: 260, cursor: CURSOR, ...opts }, data, el);
  state.charts.push(c);
  el.uplot = c;
  return c;
}

/// Back to the whole time axis after a drag-zoom (double-click does it too).
export function resetZoom(name) {
  const u = document.querySelector(`#chart-${name}`).uplot;
  const xs = u?.data[0].filter((x) => x != null);
  if (xs?.length) u.setScale('x', { min: xs[0], max: xs[xs.length - 1] });
}

/// Series on a shared x axis: the union of every run's x values, null where a run has none.
function aligned(perRun) {
  const xs = [...new Set(perRun.flatMap((pts) => pts.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const ys = perRun.map((pts) => {
    const y = new Array(xs.length).fill(null);
    for (const [x, v] of pts) y[index.get(x)] = v;
    return y;
  });
  return [xs, ...ys];
}

/// The value series `si` holds at index `idx`: the last one at or before it.
/// Every run has its own x values on the shared axis, so at most indices a
/// run has none; its curve (a step, a held allocation) still has a value.
function held(data, idx) {
  if (idx == null) return null;
  for (let k = idx; k >= 0; k--) if (data[k] != null) return data[k];
  return null;
}

const heldAt = (data, idx) => held(data, idx);

function runSeries(extra = {}) {
  return state.runs.map((r, i) => ({
    label: r.scenario.label,
    stroke: COLORS[i % COLORS.length],
    width: 1.5,
    spanGaps: true,
    value: (u, v, si, idx) => fmt(held(u.data[si], idx)),
    ...extra,
  }));
}

/// A tooltip that follows the cursor; `text(u, left, top)` gives its HTML
/// (or null to hide it).
function tooltipPlugin(text) {
  let tip;
  return {
    hooks: {
      init: (u) => {
        tip = document.createElement('div');
        tip.className = 'chart-tip';
        tip.hidden = true;
        u.over.append(tip);
      },
      setCursor: (u) => {
        const { left, top } = u.cursor;
        const html = left == null || left < 0 ? null : text(u, left, top);
        if (!html) {
          tip.hidden = true;
          return;
        }
        tip.innerHTML = html;
        tip.hidden = false;
        const w = tip.offsetWidth;
        tip.style.left = `${left + 14 + w > u.over.clientWidth ? Math.max(0, left - w - 14) : left + 14}px`;
        tip.style.top = `${Math.max(0, top - tip.offsetHeight - 10)}px`;
      },
    },
  };
}

/// Clicking a point of a per-round chart opens that round in the round
/// inspector: the run whose curve is nearest the click, its round nearest
/// in time. A drag (zoom) is not a click.
function roundClickPlugin() {
  return {
    hooks: {
      init: (u) => {
        let down = null;
        u.over.addEventListener('mousedown', (e) => { down = [e.clientX, e.clientY]; });
        u.over.addEventListener('click', (e) => {
          if (!down || Math.hypot(e.clientX - down[0], e.clientY - down[1]) > 3) return;
          const { left, top, idx } = u.cursor;
          if (idx == null || left < 0) return;
          let best = -1;
          let bestDy = Infinity;
          state.runs.forEach((_, i) => {
            const v = held(u.data[i + 1], idx);
            if (v == null) return;
            const dy = Math.abs(u.valToPos(v, 'y') - top);
            if (dy < bestDy) [best, bestDy] = [i, dy];
          });
          if (best < 0) return;
          // The data point the cursor snapped to; a pixel spans several
          // rounds of a long run (zoom in to pick each).
          const t = u.data[0][idx] * HOUR;
          const rounds = state.runs[best].rounds;
          let k = 0;
          rounds.forEach((x, j) => { if (Math.abs(x.time_s - t) < Math.abs(rounds[k].time_s - t)) k = j; });
          openRound(best, k);
        });
      },
    },
  };
}

function openRound(run, index) {
  $('#inspect-run').value = String(run);
  $('#inspect-index').value = String(index);
  inspect();
  $('#inspector').scrollIntoView({ block: 'start' });
}

/// Tooltip of a chart with one series per run: x at the cursor, then each
/// run's value there (held, as in the legend).
function seriesTip(xName, yName) {
  return tooltipPlugin((u) => {
    const idx = u.cursor.idx;
    if (idx == null) return null;
    const rows = state.runs.map((r, i) => {
      const v = held(u.data[i + 1], idx);
      return `<div><span class="swatch" style="background:${COLORS[i % COLORS.length]}"></span>` +
        `${esc(r.scenario.label)}: ${v == null ? '–' : fmt(v)}</div>`;
    });
    const click = xName === 't =' ? '<small class="hint">click: open this round in the inspector</small>' : '';
    return `<b>${xName} ${fmt(u.data[0][idx])}</b> <small>${yName}</small>${rows.join('')}${click}`;
  });
}

export function renderCharts() {
  for (const c of state.charts) c.destroy();
  state.charts = [];
  // JCT CDF: a step function per run, on the union of all JCTs.
  const cdf = state.runs.map((r) => {
    const j = r.jobs.map((x) => x.jct_s / HOUR).sort((a, b) => a - b);
    return j.map((x, k) => [x, (k + 1) / j.length]);
  });
  // JCTs span minutes to days: a log axis shows both ends.
  const log = $('#cdf-log').checked;
  mkChart($('#chart-cdf'), {
    scales: { x: log ? { time: false, distr: 3 } : { time: false }, y: { range: [0, 1] } },
    axes: [{ label: 'JCT (h)' }, { label: 'fraction of jobs' }],
    series: [{ label: 'JCT h' }, ...runSeries({ paths: uPlot.paths.stepped({ align: 1 }) })],
    plugins: [seriesTip('JCT ≤', 'h: fraction of jobs done')],
  }, aligned(cdf));
  mkChart($('#chart-util'), {
    scales: { x: { time: false }, y: { range: [0, 1] } },
    axes: [{ label: 'time (h)' }, { label: 'GPUs allocated / total' }],
    series: [{ label: 'h' }, ...runSeries()],
    plugins: [seriesTip('t =', 'h: GPUs allocated / total'), roundClickPlugin()],
  }, aligned(state.runs.map((r) => r.rounds.map((x) => [x.time_s / HOUR, x.gpus_allocated / r.total_gpus]))));
  // Goodput: each job's statistically efficient progress as a share of its
  // whole work, summed, per hour (the engine's ground truth; see work_rate).
  mkChart($('#chart-goodput'), {
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(1e-9, max)] } },
    axes: [{ label: 'time (h)' }, { label: 'jobs\' worth / h' }],
    series: [{ label: 'h' }, ...runSeries({ paths: uPlot.paths.stepped({ align: -1 }) })],
    plugins: [seriesTip('t =', 'h: jobs\' worth of work done per hour, in the interval ending then'), roundClickPlugin()],
  }, aligned(state.runs.map((r) => (r.work_rate ?? []).map(([t, v]) => [t / HOUR, v]))));
  renderQueueChart();
  mkChart($('#chart-planner'), {
    scales: { x: { time: false }, y: { distr: 3 } },
    axes: [{ label: 'time (h)' }, { label: 'ms' }],
    series: [{ label: 'h' }, ...runSeries({ width: 1 })],
    plugins: [seriesTip('t =', 'h: planner ms'), roundClickPlugin()],
  }, aligned(state.runs.map((r) => r.rounds.map((x) => [x.time_s / HOUR, Math.max(1e-3, x.planner_ms)]))));
  renderEstimates();
  renderGantt();
  renderJobHistory();
}

/// Under estimates: each job's predicted start at its submission (y) against
/// its actual start (x), one point colour per scenario, and the diagonal
/// y = x; the note gives each scenario's records and errors as
/// `simulate --estimates` prints them.
function renderEstimates() {
  const runs = state.runs.map((r, i) => [r, i]).filter(([r]) => r.estimates);
  const fig = document.querySelector('figure[data-chart=estimates]');
  fig.hidden = !runs.length;
  if (!runs.length) return;
  const perRun = runs.map(([r]) => r.estimates.records.filter((x) => x.start_s != null)
    .map((x) => ({ x: x.actual_start_s / HOUR, y: x.start_s / HOUR, name: x.name })));
  const all = perRun.flat();
  const lo = Math.min(0, ...all.map((p) => Math.min(p.x, p.y)));
  const hi = Math.max(1e-3, ...all.map((p) => Math.max(p.x, p.y)));
  const pad = (hi - lo) * 0.03;
  const range = () => [lo - pad, hi + pad];
  // Every record is drawn (a draw hook, so records sharing an actual start
  // keep their own points); the series only name the scenarios.
  const el = $('#chart-estimates');
  el.estimatePoints = perRun;
  mkChart(el, {
    scales: { x: { time: false, range }, y: { range } },
    axes: [{ label: 'actual start (h)' }, { label: 'predicted start (h)' }],
    series: [{ label: 'actual h' }, ...runs.map(([r, i]) => ({
      label: `${r.scenario.label}: ${r.estimates.records.length} jobs`,
      stroke: COLORS[i % COLORS.length],
      paths: () => null,
      points: { show: false },
    })), { label: 'y = x', stroke: '#8c959f', dash: [4, 4], width: 1, points: { show: false } }],
    plugins: [tooltipPlugin((u, left, top) => {
      let best = null;
      let bestD = 64;
      perRun.forEach((pts, k) => pts.forEach((p) => {
        const d = (u.valToPos(p.x, 'x') - left) ** 2 + (u.valToPos(p.y, 'y') - top) ** 2;
        if (d < bestD) [best, bestD] = [[k, p], d];
      }));
      if (!best) return null;
      const [k, p] = best;
      return `<b>${esc(p.name)}</b> <small>(${esc(runs[k][0].scenario.label)})</small>` +
        `<div>actual start ${fmt(p.x)} h, predicted ${fmt(p.y)} h</div>`;
    })],
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        ctx.beginPath();
        ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
        ctx.clip();
        const r = 3 * devicePixelRatio;
        perRun.forEach((pts, k) => {
          ctx.fillStyle = COLORS[runs[k][1] % COLORS.length];
          ctx.globalAlpha = 0.75;
          for (const p of pts) {
            ctx.beginPath();
            ctx.arc(u.valToPos(p.x, 'x', true), u.valToPos(p.y, 'y', true), r, 0, 2 * Math.PI);
            ctx.fill();
          }
        });
        ctx.restore();
      }],
    },
  }, [[lo - pad, hi + pad], ...runs.map(() => [null, null]), [lo - pad, hi + pad]]);
  $('#estimates-note').innerHTML = runs.map(([r, i]) => {
    const s = r.estimates.summary;
    return `<span style="color:${COLORS[i % COLORS.length]}">${esc(r.scenario.label)}</span>: ` +
      `<span class="est-count">${s.estimated}</span> jobs estimated (${s.cut_short} cut short by the budget); ` +
      `start error p50 <span class="est-p50">${fmt(s.start_err_p50_s)}</span> s, p90 ${fmt(s.start_err_p90_s)} s ` +
      `(mean wait ${fmt(s.wait_mean_s)} s, p50 error / mean wait ${fmt(s.start_err_over_wait)}); ` +
      `finish error p50 ${fmt(s.finish_err_p50_s)} s; finishes in range ${fmt(100 * s.finish_in_range)}%`;
  }).join('<br>');
}

/// Line styles of the scenarios in the queue chart: the first solid, each
/// later one its own dash (the legend names them).
export const SCENARIO_DASHES = [undefined, [6, 4], [2, 3], [10, 3, 2, 3], [1, 4], [12, 6]];

/// Under queues: GPUs each queue held round by round, one line per
/// (scenario, queue): a colour per queue, a dash per scenario; each queue's
/// guarantee a thin flat line of its colour and its scenario's dash.
function renderQueueChart() {
  const runs = state.runs.map((r, i) => [r, i]).filter(([r]) => r.queues?.length);
  const fig = document.querySelector('figure[data-chart=queues]');
  fig.hidden = !runs.length;
  if (!runs.length) return;
  const heldLines = runs.flatMap(([r, i]) => r.queues.map((q, k) => ({
    label: `${r.scenario.label}: ${q.queue}`,
    stroke: COLORS[k % COLORS.length],
    dash: SCENARIO_DASHES[i % SCENARIO_DASHES.length],
    width: 1.5,
    pts: r.rounds.map((x) => [x.time_s / HOUR, x.queue_gpus?.[k] ?? 0]),
  })));
  const guarantees = runs.flatMap(([r, i]) => r.queues.map((q, k) => [q, k]).filter(([q]) => q.guarantee > 0).map(([q, k]) => ({
    label: `${r.scenario.label}: ${q.queue} guarantee`,
    stroke: COLORS[k % COLORS.length],
    dash: SCENARIO_DASHES[i % SCENARIO_DASHES.length] ?? [1, 0],
    width: 0.75,
    guarantee: true,
    pts: r.rounds.map((x) => [x.time_s / HOUR, q.guarantee]),
  })));
  const lines = [...heldLines, ...guarantees];
  mkChart($('#chart-queues'), {
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    axes: [{ label: 'time (h)' }, { label: 'GPUs held' }],
    series: [{ label: 'h' }, ...lines.map(({ label, stroke, dash, width, guarantee }) => ({
      label, stroke, dash, width, spanGaps: true, alpha: guarantee ? 0.6 : 1, value: (u, v, si, idx) => fmt(heldAt(u.data[si], idx)),
    }))],
    plugins: [tooltipPlugin((u) => {
      const idx = u.cursor.idx;
      if (idx == null) return null;
      const rows = lines.map((l, k) => `<div><span class="swatch" style="background:${l.stroke}"></span>` +
        `${esc(l.label)}: ${fmt(heldAt(u.data[k + 1], idx))}</div>`);
      return `<b>t = ${fmt(u.data[0][idx])}</b> <small>h: GPUs held</small>${rows.join('')}`;
    })],
  }, aligned(lines.map((l) => l.pts)));
}

export function fillJobPick() {
  const r = ganttRun();
  const sel = $('#job-pick');
  const keep = sel.value;
  sel.innerHTML = '';
  // Jobs that moved most first: their history is the interesting one.
  const moves = new Map();
  for (const s of r.segments) moves.set(s.job, (moves.get(s.job) ?? 0) + 1);
  const jobs = [...r.jobs].sort((a, b) => (moves.get(b.id) ?? 0) - (moves.get(a.id) ?? 0) || a.id - b.id);
  for (const j of jobs) sel.add(new Option(`${j.name} (${moves.get(j.id) ?? 0} allocations)`, String(j.id)));
  if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
}

/// One job's segments, in time order.
export function jobSegments(r, id) {
  return r.segments.filter((s) => s.job === id).sort((a, b) => a.start_s - b.start_s);
}

/// One job's GPUs over time: a step per segment, 0 between them; the
/// tooltip names the nodes it held.
export function renderJobHistory() {
  const r = ganttRun();
  const el = $('#chart-job');
  const old = el.uplot;
  if (old && state.charts.includes(old)) {
    state.charts = state.charts.filter((c) => c !== old);
    old.destroy();
  }
  if (!r) return;
  const id = Number($('#job-pick').value);
  const job = r.jobs.find((j) => j.id === id);
  if (!job) return;
  const segs = jobSegments(r, id);
  const pts = [[job.submit_s, 0]];
  for (const s of segs) {
    pts.push([s.start_s, s.nodes.reduce((n, [, k]) => n + k, 0)]);
    pts.push([s.end_s, 0]);
  }
  pts.push([job.completion_s, 0]);
  // Equal times (a segment ending where the next starts): the later point wins.
  const xs = [];
  const ys = [];
  for (const [x, y] of pts) {
    if (xs.length && xs[xs.length - 1] === x / HOUR) ys[ys.length - 1] = y;
    else {
      xs.push(x / HOUR);
      ys.push(y);
    }
  }
  const nodes = r.cluster.nodes;
  const tip = tooltipPlugin((u) => {
    const t = u.posToVal(u.cursor.left, 'x') * HOUR;
    const s = segs.find((x) => x.start_s <= t && t < x.end_s);
    const when = `<b>t = ${fmt(t / HOUR)} h</b>`;
    if (!s) return `${when}<div>${esc(job.name)}: no GPUs</div>`;
    return `${when}<div>${esc(job.name)}: <span class="tip-gpus">${s.nodes.reduce((n, [, k]) => n + k, 0)}</span> GPUs on ` +
      `${s.nodes.map(([n, k]) => `${esc(nodes[n].name)}×${k}`).join(', ')}</div>`;
  });
  mkChart(el, {
    height: 200,
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    axes: [{ label: 'time (h)' }, { label: 'GPUs' }],
    series: [{ label: 'h' }, { label: `${job.name}: GPUs`, stroke: COLORS[0], width: 1.5, fill: 'rgba(31,111,235,.12)',
      paths: uPlot.paths.stepped({ align: 1 }) }],
    plugins: [tip],
  }, [xs, ys]);
}

function jobColor(id) {
  return `hsl(${(id * 137.508) % 360}, 60%, 55%)`;
}

/// Places each segment's GPUs on GPU slots of its nodes, as the CLI's Gantt
/// does (interval colouring per node), so that jobs sharing a node are drawn
/// side by side instead of over each other. With jobs per GPU k > 1 each
/// GPU row is split into k lanes (sharers drawn as stacked slivers): a node
/// has GPUs × k lanes, filled first lane of every GPU first, so unshared jobs
/// keep whole-GPU rows and a sharer takes the next free lane. The simulator
/// never puts more than k jobs on a GPU, so every segment finds lanes (greedy
/// colouring by start time is optimal on intervals). Returns one bar per
/// GPU a job holds: {job, node, slot (GPU row), sub (lane in it), ...}.
export function ganttBars(run) {
  const k = Math.max(1, run.scenario?.sharing ?? 1);
  const free = run.cluster.nodes.map((n) => new Array(n.gpus * k).fill(0));
  const segs = [...run.segments].sort((a, b) => a.start_s - b.start_s);
  const bars = [];
  for (const s of segs) {
    for (const [node, gpus] of s.nodes) {
      const lanes = free[node];
      const perRow = run.cluster.nodes[node].gpus;
      let placed = 0;
      for (let lane = 0; lane < lanes.length && placed < gpus; lane++) {
        if (lanes[lane] <= s.start_s + 1e-9) {
          lanes[lane] = s.end_s;
          placed++;
          bars.push({ job: s.job, node, slot: lane % perRow, sub: Math.floor(lane / perRow), k,
            start_s: s.start_s, end_s: s.end_s, seg: s });
        }
      }
    }
  }
  return bars;
}

/// Rows taller than this many pixels in all scroll inside the figure.
const GANTT_MAX_PX = 560;

export function ganttRun() {
  return state.runs[Number($('#gantt-run').value) || 0];
}

/// Job id -> name, for labels.
export function jobNames(r) {
  return new Map(r.jobs.map((j) => [j.id, j.name]));
}

export function renderGantt() {
  const r = ganttRun();
  if (!r) return;
  const nodes = r.cluster.nodes;
  const end = Math.max(...r.segments.map((s) => s.end_s), 1) / HOUR;
  const bars = ganttBars(r);
  const lanes = Math.max(1, r.scenario?.sharing ?? 1);
  const names = jobNames(r);
  // Rows and tooltips name each node's GPU type.
  const typed = (n) => `${n.name} ${n.gpu_type}`;
  const el = $('#chart-gantt');
  el.ganttBars = bars;
  // The bar under the cursor: its node from the row, its GPU lane from the
  // height within the row (as drawn below), then the one covering that time.
  const barAt = (u, left, top) => {
    const t = u.posToVal(left, 'x') * HOUR;
    const y = u.posToVal(top, 'y');
    const node = Math.floor(y);
    if (!nodes[node]) return null;
    const h = 0.9 / nodes[node].gpus;
    const slot = Math.floor((node + 0.95 - y) / h);
    const sub = Math.floor((node + 0.95 - y - slot * h) / (h / lanes));
    return bars.find((b) => b.node === node && b.slot === slot && b.sub === sub && b.start_s <= t && t < b.end_s) ?? null;
  };
  const tip = tooltipPlugin((u, left, top) => {
    const b = barAt(u, left, top);
    if (!b) return null;
    const gpus = b.seg.nodes.reduce((n, [, k]) => n + k, 0);
    const where = b.seg.nodes.map(([n, k]) => `${esc(nodes[n].name)}×${k} (${esc(nodes[n].gpu_type)})`).join(', ');
    const sharers = lanes > 1 ? bars.filter((x) => x.node === b.node && x.slot === b.slot && x !== b &&
      x.start_s < b.end_s && b.start_s < x.end_s).map((x) => names.get(x.job) ?? x.job) : [];
    return `<b>${esc(names.get(b.job) ?? b.job)}</b> <small>(job ${b.job})</small>` +
      `<div>${gpus} GPU${gpus === 1 ? '' : 's'} on ${where}</div>` +
      `<div>this lane: <span class="tip-node">${esc(nodes[b.node].name)}</span> GPU ${b.slot}` +
      `${lanes > 1 ? `, lane ${b.sub + 1} of ${lanes}` : ''} <span class="tip-type">${esc(nodes[b.node].gpu_type)}</span></div>` +
      (sharers.length ? `<div>drawn beside: ${[...new Set(sharers)].map(esc).join(', ')}</div>` : '') +
      `<div>${(b.start_s / HOUR).toFixed(2)}–${(b.end_s / HOUR).toFixed(2)} h</div>`;
  });
  el.style.maxHeight = `${GANTT_MAX_PX}px`;
  // Every label fits at 12 px a row; past that, every k-th node is named.
  const rowPx = Math.max(4, Math.min(16, Math.floor(4000 / nodes.length)));
  const every = Math.max(1, Math.ceil(12 / rowPx));
  mkChart(el, {
    height: Math.max(220, rowPx * nodes.length + 60),
    scales: { x: { time: false, range: (u, min, max) => [min, max] }, y: { range: [0, nodes.length] } },
    axes: [{ label: 'time (h)' }, {
      label: lanes > 1 ? `node (${lanes} lanes/GPU)` : 'node, GPU type',
      size: 100,
      grid: { show: false },
      splits: () => nodes.map((_, i) => i + 0.5).filter((_, i) => i % every === 0),
      values: (u, ticks) => ticks.map((t) => (nodes[Math.floor(t)] ? typed(nodes[Math.floor(t)]) : '')),
    }],
    series: [{}, { label: 'allocations', stroke: 'transparent' }],
    legend: { show: false },
    plugins: [tip],
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        // Zoomed in, bars outside the time span stay off the axes.
        ctx.beginPath();
        ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
        ctx.clip();
        // Node boundaries.
        ctx.strokeStyle = '#c8d0d8';
        ctx.lineWidth = 1;
        ctx.beginPath();
        for (let i = 0; i <= nodes.length; i++) {
          const y = Math.round(u.valToPos(i, 'y', true)) + 0.5;
          ctx.moveTo(u.bbox.left, y);
          ctx.lineTo(u.bbox.left + u.bbox.width, y);
        }
        ctx.stroke();
        for (const b of bars) {
          const x0 = u.valToPos(b.start_s / HOUR, 'x', true);
          const x1 = u.valToPos(b.end_s / HOUR, 'x', true);
          const h = 0.9 / nodes[b.node].gpus;
          const lh = h / b.k;
          const top = b.node + 0.95 - b.slot * h - b.sub * lh;
          const y0 = u.valToPos(top, 'y', true);
          const y1 = u.valToPos(top - 0.85 * lh, 'y', true);
          ctx.fillStyle = jobColor(b.job);
          ctx.fillRect(x0, y0, Math.max(1, x1 - x0), Math.max(1, y1 - y0));
        }
        ctx.restore();
      }],
    },
  }, [[0, end], [null, null]]);
}
