// chart.js: a small time-series line chart drawn on <canvas>: one line per
// series, a time axis and a value axis with a few ticks, an HTML legend with
// the latest values, a "no data yet" state. It follows its container's width
// and the device pixel ratio, and redraws on resize. The canvas carries
// data-chart (its id), data-points (values drawn) and data-last-t (the
// newest time drawn, unix ms) for tests.

import { h, formatNumber } from './dom.js';

const HEIGHT = 190; // CSS pixels
const PAD = { left: 52, right: 14, top: 12, bottom: 26 };

// cssVar reads a theme color from the stylesheet's custom properties.
function cssVar(name, fallback) {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

// niceStep rounds a raw tick step to 1, 2 or 5 times a power of ten.
function niceStep(raw) {
  if (!(raw > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

// timeLabel writes a tick time as HH:MM:SS (or HH:MM on whole minutes
// when the step is in minutes).
function timeLabel(t, stepMs) {
  const d = new Date(t);
  const pad = (n) => String(n).padStart(2, '0');
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return stepMs >= 60000 ? hm : `${hm}:${pad(d.getSeconds())}`;
}

const TIME_STEPS = [5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 1800e3];

export class LineChart {
  // id: the data-chart value; title: the caption; unit: shown after values
  // in the legend and the accessible label; digits: decimals of values
  // (0: whole numbers, and the value axis steps by 1 or more).
  constructor({ id, title, unit = '', digits = 1 }) {
    this.id = id;
    this.title = title;
    this.unit = unit;
    this.digits = digits;
    this.series = [];
    this.range = [0, 0];
    this.gapMs = 5000;
    this.canvas = h('canvas', { 'data-chart': id, 'data-points': '0', role: 'img', 'aria-label': `${title}: no data yet` });
    this.legend = h('ul', { class: 'legend', 'aria-hidden': 'true' });
    this.element = h('figure', { class: 'chart' },
      h('figcaption', { text: title }), this.canvas, this.legend);
    this.frame = 0;
    this.resize = new ResizeObserver(() => this.schedule());
    this.resize.observe(this.element);
  }

  // set replaces the data: series [{label, color, points: [{t, v}]}] where
  // v null is a gap; range [t0, t1] is the time span shown; gapMs is the
  // longest step between samples drawn as one line.
  // empty: the words shown when nothing is drawn.
  set(series, range, gapMs, empty = 'no data yet') {
    this.series = series;
    this.range = range;
    this.empty = empty;
    if (gapMs) this.gapMs = gapMs;
    this.updateLegend();
    this.schedule();
  }

  // schedule coalesces redraws into the next animation frame.
  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  destroy() {
    this.resize.disconnect();
    if (this.frame) cancelAnimationFrame(this.frame);
  }

  // visible answers the series' points inside the time range; a point
  // without a value (v null) stays, as a break in the line.
  visible() {
    const [t0, t1] = this.range;
    return this.series.map((s) => ({
      ...s,
      points: s.points.filter((p) => p.t >= t0 && p.t <= t1)
        .map((p) => ({ t: p.t, v: Number.isFinite(p.v) ? p.v : null })),
    }));
  }

  // updateLegend lists the series with their latest value in the range.
  updateLegend() {
    const items = this.visible().map((s) => {
      const last = s.points.filter((p) => p.v !== null).pop();
      const swatch = h('span', { class: 'swatch' });
      swatch.style.background = s.color;
      return h('li', {}, swatch, `${s.label} `, h('span', { class: 'legend-value', text: last ? `${formatNumber(last.v, this.digits)}${this.unit}` : '–' }));
    });
    this.legend.replaceChildren(...items);
  }

  // setup sizes the canvas for its container and the pixel ratio and
  // answers the 2D context in CSS pixels.
  setup() {
    const width = Math.max(200, Math.floor(this.element.clientWidth || 300));
    const dpr = window.devicePixelRatio || 1;
    this.canvas.style.width = `${width}px`;
    this.canvas.style.height = `${HEIGHT}px`;
    this.canvas.width = Math.round(width * dpr);
    this.canvas.height = Math.round(HEIGHT * dpr);
    const ctx = this.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, HEIGHT);
    ctx.font = '11px system-ui, sans-serif';
    return { ctx, width };
  }

  draw() {
    const { ctx, width } = this.setup();
    const data = this.visible();
    const values = data.flatMap((s) => s.points.filter((p) => p.v !== null));
    const count = values.length;
    this.canvas.dataset.points = String(count);
    this.canvas.dataset.lastT = String(values.reduce((m, p) => Math.max(m, p.t), 0));
    const plot = { x: PAD.left, y: PAD.top, w: width - PAD.left - PAD.right, h: HEIGHT - PAD.top - PAD.bottom };
    const max = values.reduce((m, p) => Math.max(m, p.v), 0);
    this.canvas.dataset.max = String(max); // the top value in view, for tests and tools
    const yStep = this.digits === 0 ? Math.max(1, niceStep((max || 1) / 4)) : niceStep((max || 1) / 4);
    const yMax = Math.max(yStep, Math.ceil((max * 1.05) / yStep) * yStep); // headroom above the top value
    this.drawAxes(ctx, plot, yMax, yStep);
    if (count === 0) {
      this.drawEmpty(ctx, plot);
      this.canvas.setAttribute('aria-label', `${this.title}: ${this.empty || 'no data yet'}`);
      return;
    }
    const sx = (t) => plot.x + ((t - this.range[0]) / Math.max(1, this.range[1] - this.range[0])) * plot.w;
    const sy = (v) => plot.y + plot.h - (v / yMax) * plot.h;
    for (const s of data) this.drawLine(ctx, s, sx, sy);
    this.canvas.setAttribute('aria-label', `${this.title}, latest: ${this.summary(data)}`);
  }

  summary(data) {
    return data.map((s) => {
      const p = s.points.filter((q) => q.v !== null).pop();
      return `${s.label} ${p ? formatNumber(p.v, this.digits) + this.unit : 'none'}`;
    }).join(', ');
  }

  drawAxes(ctx, plot, yMax, yStep) {
    const grid = cssVar('--chart-grid', '#e3e6ea');
    const text = cssVar('--chart-text', '#5b6470');
    ctx.strokeStyle = grid;
    ctx.fillStyle = text;
    ctx.lineWidth = 1;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let v = 0; v <= yMax + yStep / 2; v += yStep) {
      const y = Math.round(plot.y + plot.h - (v / yMax) * plot.h) + 0.5;
      ctx.beginPath();
      ctx.moveTo(plot.x, y);
      ctx.lineTo(plot.x + plot.w, y);
      ctx.stroke();
      ctx.fillText(formatNumber(v, yStep < 1 ? 2 : 0), plot.x - 6, y);
    }
    const [t0, t1] = this.range;
    const span = Math.max(1, t1 - t0);
    const maxTicks = Math.max(2, Math.floor(plot.w / 80));
    const step = TIME_STEPS.find((s) => span / s <= maxTicks) || TIME_STEPS[TIME_STEPS.length - 1];
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    const right = plot.x + plot.w + PAD.right;
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const x = Math.round(plot.x + ((t - t0) / span) * plot.w) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, plot.y + plot.h);
      ctx.lineTo(x, plot.y + plot.h + 4);
      ctx.stroke();
      const label = timeLabel(t, step);
      const half = ctx.measureText(label).width / 2;
      // A label that would be cut at the right edge moves left to fit.
      ctx.fillText(label, Math.min(x, right - half - 1), plot.y + plot.h + 7);
    }
    ctx.strokeStyle = cssVar('--chart-axis', '#9aa3ad');
    ctx.beginPath();
    ctx.moveTo(plot.x + 0.5, plot.y);
    ctx.lineTo(plot.x + 0.5, plot.y + plot.h + 0.5);
    ctx.lineTo(plot.x + plot.w, plot.y + plot.h + 0.5);
    ctx.stroke();
  }

  drawEmpty(ctx, plot) {
    ctx.fillStyle = cssVar('--chart-text', '#5b6470');
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    ctx.font = '13px system-ui, sans-serif';
    ctx.fillText(this.empty || 'no data yet', plot.x + plot.w / 2, plot.y + plot.h / 2);
  }

  // drawLine strokes one series, breaking it where samples are missing;
  // a point with no neighbour is drawn as a dot.
  drawLine(ctx, s, sx, sy) {
    ctx.strokeStyle = s.color;
    ctx.fillStyle = s.color;
    ctx.lineWidth = 1.75;
    ctx.lineJoin = 'round';
    let run = [];
    const flush = () => {
      if (run.length === 1) {
        ctx.beginPath();
        ctx.arc(sx(run[0].t), sy(run[0].v), 2.25, 0, Math.PI * 2);
        ctx.fill();
      } else if (run.length > 1) {
        ctx.beginPath();
        run.forEach((p, i) => (i ? ctx.lineTo(sx(p.t), sy(p.v)) : ctx.moveTo(sx(p.t), sy(p.v))));
        ctx.stroke();
      }
      run = [];
    };
    for (const p of s.points) {
      if (run.length && p.t - run[run.length - 1].t > this.gapMs) flush();
      if (p.v === null) flush();
      else run.push(p);
    }
    flush();
  }
}
