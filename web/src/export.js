// Downloads: the results as JSON and CSV, and each chart's CSV and PNG.
import { $, COLORS, HOUR } from './util.js';
import { state } from './state.js';
import { resetZoom, jobSegments, ganttRun, jobNames } from './charts.js';

export function download(name, text, type) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function csv(rows) {
  return rows.map((r) => r.map((v) => {
    const s = v == null ? '' : String(v);
    return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  }).join(',')).join('\n') + '\n';
}

/// Each chart's data as rows, the header naming the units. What the CSV
/// holds is what the chart draws (every finished job, every round, every
/// Gantt segment), in seconds as the engine gives them and in hours as drawn.
const CHART_CSV = {
  sweep: () => {
    const rows = [['policy', 'load ×', 'jobs', 'mean JCT (s)', 'p50 JCT (s)', 'p99 JCT (s)', 'makespan (s)', 'GPU allocation (fraction)',
      'workload', 'seed']];
    for (const p of state.sweep?.points ?? []) {
      const s = p.summary;
      rows.push([p.policy, p.load, s.jobs, s.avg_jct_s, s.p50_jct_s, s.p99_jct_s, s.makespan_s, s.gpu_utilization,
        p.workload ?? state.sweep.base.workload, p.seed ?? state.sweep.base.seed]);
    }
    return rows;
  },
  cdf: () => {
    const rows = [['scenario', 'policy', 'job', 'jct (s)', 'jct (h)', 'fraction of jobs']];
    for (const r of state.runs) {
      const jobs = [...r.jobs].sort((a, b) => a.jct_s - b.jct_s);
      jobs.forEach((j, k) => rows.push([r.scenario.label, r.summary.policy, j.name, j.jct_s, j.jct_s / HOUR, (k + 1) / jobs.length]));
    }
    return rows;
  },
  util: () => {
    const rows = [['scenario', 'policy', 'round', 'time (s)', 'time (h)', 'GPUs allocated', 'GPUs total', 'allocation (fraction)']];
    for (const r of state.runs) {
      r.rounds.forEach((x, i) => rows.push([r.scenario.label, r.summary.policy, i, x.time_s, x.time_s / HOUR,
        x.gpus_allocated, r.total_gpus, x.gpus_allocated / r.total_gpus]));
    }
    return rows;
  },
  estimates: () => {
    const rows = [['scenario', 'policy', 'job', 'name', 'submit (s)', 'estimated at (s)', 'predicted start (s)', 'actual start (s)',
      'predicted finish (s)', 'actual finish (s)', 'cut short']];
    for (const r of state.runs) {
      for (const x of r.estimates?.records ?? []) {
        rows.push([r.scenario.label, r.summary.policy, x.job, x.name, x.submit_s, x.at_s, x.start_s, x.actual_start_s,
          x.finish_s, x.actual_finish_s, x.cut_short]);
      }
    }
    return rows;
  },
  goodput: () => {
    const rows = [['scenario', 'policy', 'time (s)', 'time (h)', 'jobs\' worth of work per hour (interval ending then)']];
    for (const r of state.runs) for (const [t, v] of r.work_rate ?? []) rows.push([r.scenario.label, r.summary.policy, t, t / HOUR, v]);
    return rows;
  },
  queues: () => {
    const rows = [['scenario', 'policy', 'round', 'time (s)', 'time (h)', 'queue', 'guarantee (GPUs)', 'GPUs held']];
    for (const r of state.runs) {
      r.rounds.forEach((x, i) => (r.queues ?? []).forEach((q, k) => rows.push([r.scenario.label, r.summary.policy, i,
        x.time_s, x.time_s / HOUR, q.queue, q.guarantee, x.queue_gpus?.[k] ?? 0])));
    }
    return rows;
  },
  planner: () => {
    const rows = [['scenario', 'policy', 'round', 'time (s)', 'time (h)', 'planner (ms)', 'status']];
    for (const r of state.runs) {
      r.rounds.forEach((x, i) => rows.push([r.scenario.label, r.summary.policy, i, x.time_s, x.time_s / HOUR, x.planner_ms, x.status]));
    }
    return rows;
  },
  job: () => {
    const r = ganttRun();
    const id = Number($('#job-pick').value);
    const name = jobNames(r).get(id);
    const rows = [['scenario', 'policy', 'job id', 'job', 'start (s)', 'end (s)', 'start (h)', 'end (h)', 'GPUs', 'nodes (name×GPUs)']];
    for (const s of jobSegments(r, id)) {
      rows.push([r.scenario.label, r.summary.policy, id, name, s.start_s, s.end_s, s.start_s / HOUR, s.end_s / HOUR,
        s.nodes.reduce((n, [, k]) => n + k, 0), s.nodes.map(([n, k]) => `${r.cluster.nodes[n].name}×${k}`).join(' ')]);
    }
    return rows;
  },
  gantt: () => {
    const r = ganttRun();
    const names = jobNames(r);
    const rows = [['scenario', 'policy', 'job id', 'job', 'node', 'GPUs', 'start (s)', 'end (s)', 'start (h)', 'end (h)']];
    for (const s of r.segments) {
      for (const [node, gpus] of s.nodes) {
        rows.push([r.scenario.label, r.summary.policy, s.job, names.get(s.job), r.cluster.nodes[node].name, gpus,
          s.start_s, s.end_s, s.start_s / HOUR, s.end_s / HOUR]);
      }
    }
    return rows;
  },
};

function chartCsv(name) {
  download(`gpuplan-${name}.csv`, csv(CHART_CSV[name]()), 'text/csv');
}

/// The chart as a PNG: its canvas on white, under its caption and a legend
/// of the scenarios drawn (the page's legend is HTML, not on the canvas).
function chartPng(name) {
  const fig = document.querySelector(`figure[data-chart=${name}]`);
  const u = fig.querySelector('.uplot')?.parentElement.uplot;
  if (!u) return;
  const src = u.ctx.canvas;
  const dpr = src.width / u.width;
  const head = Math.round(44 * dpr);
  const out = document.createElement('canvas');
  out.width = src.width;
  out.height = src.height + head;
  const ctx = out.getContext('2d');
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, out.width, out.height);
  ctx.fillStyle = '#1b1f24';
  ctx.font = `600 ${Math.round(14 * dpr)}px sans-serif`;
  const title = fig.querySelector('.title').textContent.replace(/:$/, '');
  const sub = name === 'gantt' || name === 'job' ? ` ${ganttRun().scenario.label} (${ganttRun().summary.policy})` : '';
  const job = name === 'job' ? `, ${$('#job-pick').selectedOptions[0]?.textContent.replace(/ \(.*/, '')}` : '';
  ctx.fillText(title + sub + job, 8 * dpr, 17 * dpr);
  if (name !== 'gantt' && name !== 'job') {
    ctx.font = `${Math.round(12 * dpr)}px sans-serif`;
    let x = 8 * dpr;
    const labels = name === 'sweep' ? state.sweep.policies
      : name === 'queues' ? [...new Set(state.runs.flatMap((r) => (r.queues ?? []).map((q) => q.queue)))]
        : state.runs.map((r) => `${r.scenario.label}: ${r.summary.policy}`);
    labels.forEach((label, i) => {
      ctx.fillStyle = COLORS[i % COLORS.length];
      ctx.fillRect(x, 28 * dpr, 14 * dpr, 4 * dpr);
      ctx.fillStyle = '#1b1f24';
      ctx.fillText(label, x + 18 * dpr, 35 * dpr);
      x += ctx.measureText(label).width + 34 * dpr;
    });
  }
  ctx.drawImage(src, 0, head);
  const a = document.createElement('a');
  a.href = out.toDataURL('image/png');
  a.download = `gpuplan-${name}.png`;
  a.click();
}

export function addChartTools() {
  for (const fig of document.querySelectorAll('figure[data-chart]')) {
    const name = fig.dataset.chart;
    const tools = document.createElement('span');
    tools.className = 'chart-tools';
    tools.innerHTML = '<button type="button" class="csv" title="This chart\'s data as CSV">CSV</button>' +
      '<button type="button" class="png" title="This chart as a PNG image">PNG</button>' +
      '<button type="button" class="reset-zoom" title="Drag across the chart to zoom into a time span; this shows all of it again (so does a double-click)">Reset zoom</button>';
    tools.querySelector('.reset-zoom').addEventListener('click', () => resetZoom(name));
    tools.querySelector('.csv').addEventListener('click', () => chartCsv(name));
    tools.querySelector('.png').addEventListener('click', () => chartPng(name));
    fig.querySelector('figcaption').append(tools);
  }
}

export function exportJson() {
  const out = state.runs.map(({ run_id, elapsed_ms, restored, ...r }) => r);
  download('gpuplan-results.json', JSON.stringify(out, null, 2), 'application/json');
}

export function exportJobsCsv() {
  const rows = [['scenario', 'policy', 'workload', 'name', 'app', 'submit_s', 'completion_s', 'jct_s', 'restarts', 'attained_gpu_s', 'max_gpus_used']];
  for (const r of state.runs) {
    for (const j of r.jobs) {
      rows.push([r.scenario.label, r.summary.policy, r.summary.workload, j.name, j.app, j.submit_s, j.completion_s, j.jct_s, j.restarts, j.attained_gpu_s, j.max_gpus_used]);
    }
  }
  download('gpuplan-jobs.csv', csv(rows), 'text/csv');
}

export function exportRoundsCsv() {
  const rows = [['scenario', 'policy', 'time_s', 'active', 'running', 'gpus_allocated', 'restarts', 'planner_ms', 'status', 'bound', 'gap']];
  for (const r of state.runs) {
    for (const x of r.rounds) {
      rows.push([r.scenario.label, r.summary.policy, x.time_s, x.active, x.running, x.gpus_allocated, x.restarts, x.planner_ms, x.status, x.bound, x.gap]);
    }
  }
  download('gpuplan-rounds.csv', csv(rows), 'text/csv');
}
