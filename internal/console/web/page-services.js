// page-services.js: the services list. A table of every service (name,
// processor, state, version, instances, endpoint, QPS and p99 from the last
// metrics point), a filter box, and a "Deploy a service" link. It refreshes
// every 2.5 s, updating the rows in place so that the focus, the filter
// text and any selection survive.

import { listServices, metrics } from './api.js';
import { h, setText, stateBadge, formatNumber, processorOf, createNotice, tableWrap } from './dom.js';
import { poll } from './poll.js';
import { regions, serviceHash, session, takeFlash } from './state.js';

const REFRESH_MS = 2500;
// COLUMNS: each column's heading and class; the class lets narrow screens
// drop the columns a phone can spare (style.css).
const COLUMNS = [['Name', 'name'], ['Processor', 'processor'], ['State', 'state'], ['Version', 'version'],
  ['Instances', 'instances'], ['Endpoint', 'endpoint'], ['QPS', 'num qps'], ['p99 (ms)', 'num p99']];

export function mount(main) {
  const notice = createNotice('services-notice'); // refresh failures
  const flashNotice = createNotice('flash-notice'); // a message left by the previous page
  const flash = takeFlash();
  if (flash) flashNotice.show(flash.warnings.length ? 'warn' : 'ok', flash.message, flash.warnings);
  const filter = h('input', {
    id: 'filter', type: 'search', placeholder: 'name, processor or state',
    autocomplete: 'off', spellcheck: 'false', value: session.listFilter,
  });
  const count = h('p', { id: 'services-count', class: 'muted', role: 'status' });
  const tbody = h('tbody');
  const table = h('table', { id: 'services', class: 'data' },
    h('caption', { class: 'visually-hidden', text: 'Services' }),
    h('thead', {}, h('tr', {}, COLUMNS.map(([text, cls]) => h('th', { scope: 'col', class: cls, text })))),
    tbody);
  const view = { tbody, rows: new Map(), filter, count, loaded: false, noMetrics: false };

  filter.addEventListener('input', () => {
    session.listFilter = filter.value;
    applyFilter(view);
  });

  main.append(
    h('div', { class: 'page-head' },
      h('h1', { tabindex: '-1', text: 'Services' }),
      h('a', { id: 'deploy-link', class: 'button primary', href: '#/deploy', text: 'Deploy a service' })),
    flashNotice.element,
    notice.element,
    h('div', { class: 'toolbar' },
      h('label', { for: 'filter', text: 'Filter' }), filter, count),
    tableWrap(table, 'Services table'));

  const loop = poll(() => refresh(view, notice), REFRESH_MS, (err) => notice.show('error', err.message));
  return () => loop.stop();
}

// refresh fetches the services and the latest metrics and updates the
// table; a metrics failure only blanks the QPS and p99 columns (a 404, from
// a server that keeps no history, stops asking for them).
async function refresh(view, notice) {
  const [list, stats] = await Promise.allSettled([listServices(), view.noMetrics ? null : metrics()]);
  if (stats.status === 'rejected' && stats.reason.status === 404) view.noMetrics = true; // a server without history
  if (list.status === 'rejected') {
    notice.show('error', `Could not load the services: ${list.reason.message}`);
    return;
  }
  notice.clear();
  const latest = stats.status === 'fulfilled' && stats.value ? lastPoints(stats.value) : new Map();
  const services = [...(list.value.Services || [])].sort((a, b) => a.ServiceName.localeCompare(b.ServiceName));
  for (const s of services) regions.set(s.ServiceName, s.Region);
  updateRows(view, services, latest);
  view.loaded = true;
  applyFilter(view);
}

// lastPoints answers each service's newest metrics point.
function lastPoints(answer) {
  const out = new Map();
  for (const [name, points] of Object.entries((answer && answer.Services) || {})) {
    if (Array.isArray(points) && points.length) out.set(name, points[points.length - 1]);
  }
  return out;
}

// updateRows makes the table's rows match the services: new rows are
// created, gone ones removed, the others' cells updated in place.
function updateRows(view, services, latest) {
  const names = new Set(services.map((s) => s.ServiceName));
  for (const [name, row] of view.rows) {
    if (!names.has(name)) {
      row.tr.remove();
      view.rows.delete(name);
    }
  }
  services.forEach((s, i) => {
    let row = view.rows.get(s.ServiceName);
    if (!row) {
      row = createRow(s.ServiceName);
      view.rows.set(s.ServiceName, row);
    }
    fillRow(row, s, latest.get(s.ServiceName));
    if (view.tbody.children[i] !== row.tr) view.tbody.insertBefore(row.tr, view.tbody.children[i] || null);
  });
  const empty = view.tbody.querySelector('tr.empty');
  if (services.length === 0 && !empty) {
    view.tbody.append(h('tr', { class: 'empty' }, h('td', { colspan: String(COLUMNS.length) },
      'No services yet. ', h('a', { href: '#/deploy', text: 'Deploy one' }), '.')));
  } else if (services.length > 0 && empty) {
    empty.remove();
  }
}

function createRow(name) {
  const cells = {
    link: h('a', { href: serviceHash(name), 'data-key': name, text: name }),
    processor: h('td', { class: 'processor' }),
    state: h('td', { class: 'state' }),
    badge: h('span'),
    version: h('td', { class: 'version' }),
    instances: h('td', { class: 'instances' }),
    endpoint: h('code'),
    qps: h('td', { class: 'num qps' }),
    p99: h('td', { class: 'num p99' }),
  };
  cells.state.append(cells.badge);
  const tr = h('tr', { 'data-service': name },
    h('th', { scope: 'row', class: 'name' }, cells.link),
    cells.processor, cells.state, cells.version, cells.instances,
    h('td', { class: 'endpoint' }, cells.endpoint),
    cells.qps, cells.p99);
  return { tr, cells, search: '' };
}

function fillRow(row, s, point) {
  const processor = processorOf(s.ServiceConfig);
  const c = row.cells;
  setText(c.processor, processor);
  stateBadge(s.Status, c.badge);
  setText(c.version, s.PendingVersion ? `${s.CurrentVersion} → ${s.PendingVersion}` : s.CurrentVersion);
  setText(c.instances, `${s.RunningInstance}/${s.TotalInstance}`);
  setText(c.endpoint, s.IntranetEndpoint);
  setText(c.qps, point ? formatNumber(sumRPS(point.RPS)) : '–');
  setText(c.p99, point && point.P99Ms !== undefined ? formatNumber(point.P99Ms) : '–');
  row.search = `${s.ServiceName} ${processor} ${s.Status}`.toLowerCase();
}

function sumRPS(rps) {
  return Object.values(rps || {}).reduce((sum, v) => sum + (Number(v) || 0), 0);
}

// applyFilter hides the rows that do not hold every word of the filter.
function applyFilter(view) {
  const words = view.filter.value.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const row of view.rows.values()) {
    const match = words.every((w) => row.search.includes(w));
    row.tr.hidden = !match;
    if (match) shown++;
  }
  if (!view.loaded) {
    setText(view.count, 'Loading…');
  } else {
    const total = view.rows.size;
    setText(view.count, words.length ? `${shown} of ${total} services` : `${total} service${total === 1 ? '' : 's'}`);
  }
}
