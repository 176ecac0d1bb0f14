// metrics-panel.js: the detail page's four charts (requests/s by status
// code, p50/p99 latency, batch size, queue depth and in-flight requests),
// fed from GET /api/v2/metrics?service=<name>&since=<ms>: the first call
// takes the server's whole window, the next ones only the newer points.
// A generative service (llm_*) gets five more from its points' Generation:
// time to first token and inter-token latency (p50/p99), tokens/s in and
// out, running and waiting sequences, and key/value cache use.

import { metrics } from './api.js';
import { h, setText } from './dom.js';
import { LineChart } from './chart.js';

const RANGES = [
  { ms: 60e3, label: 'last minute' },
  { ms: 300e3, label: 'last 5 minutes' },
  { ms: 600e3, label: 'last 10 minutes' },
];

// Status code colors: greens for 2xx, ambers for 4xx, reds for 5xx.
const CODE_COLORS = {
  2: ['#1a7f37', '#2da44e', '#4ac26b'],
  3: ['#0969da', '#54aeff'],
  4: ['#bc4c00', '#d4a72c', '#e16f24', '#9a6700'],
  5: ['#cf222e', '#a40e26', '#ff8182'],
};
const OTHER_COLORS = ['#8250df', '#6e7781', '#bf3989'];

function codeColor(code, nth) {
  const family = CODE_COLORS[String(code)[0]] || OTHER_COLORS;
  return family[nth % family.length];
}

export class MetricsPanel {
  constructor(name) {
    this.name = name;
    this.points = [];
    this.intervalMs = 2000;
    this.windowMs = 600e3;
    this.rangeMs = 300e3;
    this.charts = {
      rps: new LineChart({ id: 'rps', title: 'Requests/s by status code', unit: '/s', digits: 2 }),
      latency: new LineChart({ id: 'latency', title: 'Latency (ms)', unit: ' ms', digits: 1 }),
      batch: new LineChart({ id: 'batch', title: 'Batch size', digits: 1 }),
      queue: new LineChart({ id: 'queue', title: 'Queue depth and in flight', digits: 0 }),
    };
    this.grid = h('div', { class: 'charts' }, Object.values(this.charts).map((c) => c.element));
    this.status = h('p', { id: 'metrics-status', class: 'muted', role: 'status' });
    const select = h('select', { id: 'metrics-range' },
      RANGES.map((r) => h('option', { value: String(r.ms), selected: r.ms === this.rangeMs, text: r.label })));
    select.addEventListener('change', () => {
      this.rangeMs = Number(select.value);
      this.render();
    });
    this.element = h('section', { class: 'panel', 'aria-labelledby': 'metrics-title' },
      h('div', { class: 'panel-head' },
        h('h2', { id: 'metrics-title', text: 'Metrics' }),
        h('label', { for: 'metrics-range', class: 'inline-label', text: 'Show' }), select),
      this.status,
      this.grid);
    this.render();
  }

  // setGenerative adds the charts of a generative service's points, once.
  setGenerative(on) {
    if (!on || this.genCharts) return;
    this.genCharts = {
      ttft: new LineChart({ id: 'ttft', title: 'Time to first token (ms)', unit: ' ms', digits: 1 }),
      itl: new LineChart({ id: 'itl', title: 'Inter-token latency (ms)', unit: ' ms', digits: 1 }),
      tokens: new LineChart({ id: 'tokens', title: 'Tokens/s', unit: '/s', digits: 1 }),
      sequences: new LineChart({ id: 'sequences', title: 'Running and waiting sequences', digits: 0 }),
      cache: new LineChart({ id: 'cache', title: 'KV cache use (% of capacity)', unit: ' %', digits: 1 }),
    };
    this.grid.append(...Object.values(this.genCharts).map((c) => c.element));
    this.render();
  }

  // refresh fetches the points newer than the last one held and redraws.
  // A 404 (a server that keeps no history) stops the asking.
  async refresh() {
    if (this.unavailable) return;
    const since = this.points.length ? this.points[this.points.length - 1].T : 0;
    let answer;
    try {
      answer = await metrics(this.name, since);
    } catch (err) {
      setText(this.status, `Metrics unavailable: ${err.message}`);
      if (err.status === 404) this.unavailable = true;
      return;
    }
    setText(this.status, '');
    if (answer.IntervalMs > 0) this.intervalMs = answer.IntervalMs;
    if (answer.WindowMs > 0) this.windowMs = answer.WindowMs;
    const fresh = ((answer.Services || {})[this.name] || []).filter((p) => p && p.T > since);
    this.points.push(...fresh);
    const newest = this.points.length ? this.points[this.points.length - 1].T : 0;
    this.points = this.points.filter((p) => p.T >= newest - this.windowMs);
    this.render();
  }

  // render hands each chart its series over the chosen time range, which
  // ends at the newest point (the server's clock, not the browser's).
  render() {
    const pts = this.points;
    const end = pts.length ? pts[pts.length - 1].T : Date.now();
    const range = [end - this.rangeMs, end];
    const gap = this.intervalMs * 2.5;
    // With points but nothing to draw, the service had no traffic.
    const idle = (what) => (pts.length ? `no ${what} in this time` : 'no data yet');
    const line = (label, color, pick) => ({ label, color, points: pts.map((p) => ({ t: p.T, v: pick(p) })) });
    const codes = [...new Set(pts.flatMap((p) => Object.keys(p.RPS || {})))].sort();
    const seen = {};
    this.charts.rps.set(codes.map((code) => {
      const family = code[0];
      seen[family] = (seen[family] || 0) + 1;
      return line(code, codeColor(code, seen[family] - 1), (p) => Number((p.RPS || {})[code]) || 0);
    }), range, gap, idle('requests'));
    this.charts.latency.set([
      line('p50', '#0969da', (p) => num(p.P50Ms)),
      line('p99', '#cf222e', (p) => num(p.P99Ms)),
    ], range, gap, idle('requests'));
    this.charts.batch.set([line('batch', '#8250df', (p) => num(p.Batch))], range, gap, idle('model runs'));
    this.charts.queue.set([
      line('queue depth', '#bc4c00', (p) => num(p.QueueDepth)),
      line('in flight', '#0969da', (p) => num(p.InFlight)),
    ], range, gap);
    if (!this.genCharts) return;
    // A point without Generation (before the service was generative, or
    // from an older server) is a gap, not a zero.
    const gen = (p) => p.Generation || {};
    const g = this.genCharts;
    g.ttft.set([
      line('p50', '#0969da', (p) => num(gen(p).TTFTP50Ms)),
      line('p99', '#cf222e', (p) => num(gen(p).TTFTP99Ms)),
    ], range, gap, idle('first tokens'));
    g.itl.set([
      line('p50', '#0969da', (p) => num(gen(p).ITLP50Ms)),
      line('p99', '#cf222e', (p) => num(gen(p).ITLP99Ms)),
    ], range, gap, idle('tokens'));
    g.tokens.set([
      line('prompt (in)', '#8250df', (p) => num(gen(p).PromptTokensPerSec)),
      line('generated (out)', '#1a7f37', (p) => num(gen(p).TokensPerSec)),
    ], range, gap);
    g.sequences.set([
      line('running', '#0969da', (p) => num(gen(p).Running)),
      line('waiting', '#bc4c00', (p) => num(gen(p).Waiting)),
    ], range, gap);
    g.cache.set([line('cache use', '#8250df', (p) => cachePercent(p))], range, gap, idle('cache bound'));
  }

  destroy() {
    Object.values(this.charts).forEach((c) => c.destroy());
    Object.values(this.genCharts || {}).forEach((c) => c.destroy());
  }
}

// cachePercent is a point's key/value cache use as a percentage of its
// capacity; null without a Generation or a capacity.
export function cachePercent(p) {
  const g = (p && p.Generation) || {};
  const used = num(g.CacheTokens);
  const cap = num(g.CacheCapacity);
  return used === null || !(cap > 0) ? null : (100 * used) / cap;
}

function num(v) {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}
