// DOM, number and text helpers shared by every part of the page.
export const $ = (sel) => document.querySelector(sel);

export const COLORS = ['#1f6feb', '#d1242f', '#1a7f37', '#8250df', '#bf8700', '#0a7ea4', '#cf222e', '#57606a'];

export const HOUR = 3600;

export const hours = (v) => (v == null ? null : v / HOUR);

export function fmt(v) {
  if (v == null || Number.isNaN(v)) return '–';
  return Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v * 100) / 100) : v.toFixed(3);
}

export function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
}

export function setStatus(text) {
  $('#status').textContent = text;
}

export function showError(text) {
  const e = $('#error');
  e.textContent = text;
  e.hidden = !text;
}

/// A change against the baseline: a percentage, or a ratio where it is
/// more than ten-fold either way (planner times span orders of magnitude).
export function deltaText(v, base) {
  const d = (v - base) / Math.abs(base);
  if (v > 0 && base > 0 && (v / base >= 10 || base / v >= 10)) {
    const r = v / base;
    return r >= 1 ? `×${r >= 100 ? Math.round(r) : r.toFixed(1)}` : `×1/${base / v >= 100 ? Math.round(base / v) : (base / v).toFixed(1)}`;
  }
  return `${d >= 0 ? '+' : ''}${(d * 100).toFixed(1)}%`;
}
