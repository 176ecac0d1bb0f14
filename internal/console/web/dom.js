// dom.js: small helpers to build and update DOM nodes without innerHTML
// (every server string goes in as a text node), and formatters for the
// numbers, sizes and times the pages show.

// h builds an element. attrs: "class", "text", "data-*", "aria-*" and other
// attributes (null/false leave them out, true sets them empty), "on*"
// functions become event listeners, "props" sets DOM properties.
// Children are nodes or strings (text nodes); null/false are skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'text') {
      el.textContent = String(value);
    } else if (key === 'props') {
      Object.assign(el, value);
    } else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

// append adds children (nodes, strings, nested arrays) to el.
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// setText changes a node's text only when it differs, so that screen
// readers and selections are not disturbed by refreshes that change nothing.
export function setText(el, text) {
  const s = text === null || text === undefined ? '' : String(text);
  if (el.textContent !== s) el.textContent = s;
}

// replaceKeepingFocus swaps container's children for the new ones; when the
// focus was on an element with data-key inside it, the element with the
// same data-key in the new content gets the focus back.
export function replaceKeepingFocus(container, children) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.getAttribute('data-key') : null;
  container.replaceChildren();
  append(container, children);
  if (key !== null) {
    const again = container.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

// tableWrap puts a table in a horizontally scrolling, focusable region so
// that narrow screens scroll the table, not the page.
export function tableWrap(table, label) {
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': label, tabindex: '0' }, table);
}

const STATE_CLASSES = {
  running: 'ok', creating: 'busy', updating: 'busy', failed: 'bad', stopped: 'off',
};

// stateBadge makes (or updates) a badge for a service state.
export function stateBadge(state, el = h('span')) {
  const s = state || 'Unknown';
  el.className = `badge badge-${STATE_CLASSES[s.toLowerCase()] || 'off'}`;
  setText(el, s);
  el.dataset.state = s;
  return el;
}

// formatBytes writes a byte count in binary units: 1.5 MiB.
export function formatBytes(n) {
  if (n === null || n === undefined || n < 0 || !Number.isFinite(n)) return 'unknown';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? Math.round(v) : v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

// formatDuration writes seconds as "1 h 2 min", "3 min 4 s" or "5 s".
export function formatDuration(sec) {
  if (sec === null || sec === undefined || sec < 0 || !Number.isFinite(sec)) return 'unknown';
  const s = Math.round(sec);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// formatTime writes a server timestamp in local time, "2024-05-01 13:45:02".
export function formatTime(value) {
  if (!value) return '';
  const d = new Date(value);
  if (Number.isNaN(d.getTime()) || d.getFullYear() < 2) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// formatNumber writes a metric value with sensible precision, or a dash.
export function formatNumber(v, digits = 1) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString('en-US');
  return v.toFixed(digits).replace(/\.0+$/, '');
}

// processorOf reads the processor code from a service's ServiceConfig text;
// a custom processor shows as "custom (<type>)".
export function processorOf(configText) {
  try {
    const cfg = JSON.parse(configText || '{}');
    if (cfg && typeof cfg === 'object') {
      if (typeof cfg.processor === 'string' && cfg.processor) return cfg.processor;
      if (cfg.processor_path) return `custom (${cfg.processor_type || 'unknown type'})`;
    }
  } catch {
    const m = /"processor"\s*:\s*"([^"]*)"/.exec(configText || '');
    if (m) return m[1];
  }
  return '';
}

// prettyJSON pretty-prints JSON text with two spaces; text that does not
// parse is returned as it is.
export function prettyJSON(text) {
  try {
    return formatJSON(JSON.parse(text));
  } catch {
    return text;
  }
}

// formatJSON writes a value as indented JSON, except that a list of plain
// values (numbers, strings, booleans: a shape, a tensor's data) stays on
// one line.
export function formatJSON(value, indent = '') {
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    if (value.every((v) => v === null || typeof v !== 'object')) {
      return `[${value.map((v) => JSON.stringify(v)).join(', ')}]`;
    }
    const inner = `${indent}  `;
    return `[\n${value.map((v) => inner + formatJSON(v, inner)).join(',\n')}\n${indent}]`;
  }
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length === 0) return '{}';
    const inner = `${indent}  `;
    return `{\n${keys.map((k) => `${inner}${JSON.stringify(k)}: ${formatJSON(value[k], inner)}`).join(',\n')}\n${indent}}`;
  }
  return JSON.stringify(value);
}

// createNotice makes a message area for a page: show(kind, message, items)
// with kind info, ok, warn or error (errors are announced at once), and
// clear(). The user can dismiss it.
export function createNotice(id) {
  const el = h('div', { class: 'notice', id, hidden: true });
  const clear = () => {
    el.hidden = true;
    el.replaceChildren();
  };
  const show = (kind, message, items = []) => {
    el.className = `notice notice-${kind}`;
    el.setAttribute('role', kind === 'error' ? 'alert' : 'status');
    const dismiss = h('button', { type: 'button', class: 'icon-button dismiss', 'aria-label': 'Dismiss message', text: '×', onclick: clear });
    el.replaceChildren(
      h('div', { class: 'notice-body' },
        h('p', { class: 'notice-message', text: message }),
        items.length ? h('ul', {}, items.map((item) => h('li', { text: item }))) : null),
      dismiss);
    el.hidden = false;
  };
  return { element: el, show, clear };
}
