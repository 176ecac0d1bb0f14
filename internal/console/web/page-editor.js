// page-editor.js: the service.json editor, for deploying a new service
// (POST /api/v2/services) and modifying one (PUT .../<Region>/<name>). A
// textarea with a line-number gutter; validation by the server
// (POST /api/v2/validate) on demand and ~400 ms after typing stops; each
// problem is placed at the line of the key it names, marked in the gutter,
// and listed with a button that selects that line.

import { control, servicePath, validate, regionOf, ApiError } from './api.js';
import { h, setText, createNotice, prettyJSON } from './dom.js';
import { scanKeys, lineOfPath, lineStartOffset } from './jsonscan.js';
import { go, serviceHash, setFlash } from './state.js';

const DEBOUNCE_MS = 400;

// TEMPLATE is what a new deployment starts from: the echo example.
const TEMPLATE = `{
  "name": "my_echo",
  "processor": "echo",
  "model_config": {"sleep_ms": 0},
  "metadata": {
    "instance": 1,
    "rpc": {"worker_threads": 5, "max_queue_size": 64, "keepalive": 5000}
  }
}
`;

let deployDraft = TEMPLATE; // kept while the tab lives, so a detour keeps it

export function mount(main, { name } = {}) {
  const editor = new Editor(name);
  main.append(editor.element);
  editor.load().catch((err) => editor.notice.show('error', err.message));
  return () => editor.destroy();
}

class Editor {
  constructor(name) {
    this.name = name || null; // null: deploy a new service
    this.seq = 0; // validation requests sent; only the newest answer counts
    this.timer = 0;
    this.notice = createNotice('editor-notice');
    this.build();
  }

  build() {
    const modify = Boolean(this.name);
    this.gutter = h('div', { class: 'gutter', id: 'gutter', 'aria-hidden': 'true' });
    this.marks = h('div', { class: 'editor-marks' }); // bands behind the marked lines
    const backdrop = h('div', { class: 'editor-backdrop', 'aria-hidden': 'true' }, this.marks);
    this.text = h('textarea', {
      id: 'editor', class: 'code', wrap: 'off', spellcheck: 'false', autocomplete: 'off',
      autocapitalize: 'off', 'aria-label': 'service.json', 'aria-describedby': 'validate-status problems',
      disabled: modify,
    });
    this.status = h('span', { id: 'validate-status', role: 'status', class: 'muted' });
    this.problems = h('ul', { id: 'problems', class: 'problems', 'aria-label': 'Problems' });
    this.warnings = h('ul', { id: 'warnings', class: 'warnings', 'aria-label': 'Warnings' });
    this.submitError = h('pre', { id: 'submit-error', class: 'submit-error', role: 'alert', hidden: true });
    this.submit = h('button', { type: 'button', id: 'submit', class: 'primary', text: modify ? 'Save' : 'Deploy', disabled: modify });
    const validateButton = h('button', { type: 'button', id: 'validate', text: 'Validate' });
    const cancel = h('a', { class: 'button', href: modify ? serviceHash(this.name) : '#/services', text: 'Cancel' });

    this.text.addEventListener('input', () => this.onInput());
    this.text.addEventListener('scroll', () => this.syncScroll());
    validateButton.addEventListener('click', () => this.runValidate());
    this.submit.addEventListener('click', () => {
      this.send().catch((err) => this.showSubmitError(err.message));
    });

    this.element = h('div', { class: 'editor-page' },
      h('div', { class: 'page-head' },
        h('h1', { tabindex: '-1', text: modify ? `Modify ${this.name}` : 'Deploy a service' })),
      h('p', { class: 'help' }, modify
        ? 'Saving creates a new version of the service: it loads beside the current one and takes the traffic once loaded.'
        : 'Write the service.json of the new service. It is checked as you type.'),
      this.notice.element,
      h('div', { class: 'editor-wrap' }, this.gutter, h('div', { class: 'editor-area' }, backdrop, this.text)),
      h('div', { class: 'actions' }, validateButton, this.submit, cancel, this.status),
      this.submitError,
      this.problems,
      this.warnings);
  }

  // load fills the editor: the draft for a deployment, the service's
  // current config (pretty-printed) for a modification.
  async load() {
    if (!this.name) {
      this.setText(deployDraft);
    } else {
      setText(this.status, 'Loading the current config…');
      const region = await regionOf(this.name);
      const svc = await control('GET', servicePath(region, this.name));
      if (this.destroyed) return;
      this.region = svc.Region;
      this.setText(`${prettyJSON(svc.ServiceConfig)}\n`);
      this.text.disabled = false;
      this.submit.disabled = false;
      setText(this.status, '');
    }
    this.text.focus();
    this.text.setSelectionRange(0, 0);
    this.runValidate();
  }

  destroy() {
    this.destroyed = true;
    clearTimeout(this.timer);
  }

  setText(value) {
    this.text.value = value;
    this.renderGutter();
  }

  onInput() {
    if (!this.name) deployDraft = this.text.value;
    this.renderGutter();
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.runValidate(), DEBOUNCE_MS);
  }

  // renderGutter keeps one numbered line per text line; marks survive
  // until the next validation answer replaces them.
  renderGutter() {
    const lines = this.text.value.split('\n').length;
    const have = this.gutter.children.length;
    for (let n = have + 1; n <= lines; n++) {
      this.gutter.append(h('div', { class: 'gutter-line', 'data-line': String(n), text: n }));
    }
    for (let n = have; n > lines; n--) this.gutter.lastChild.remove();
    this.syncScroll();
  }

  syncScroll() {
    this.gutter.scrollTop = this.text.scrollTop;
    this.marks.style.transform = `translate(${-this.text.scrollLeft}px, ${-this.text.scrollTop}px)`;
  }

  // runValidate validates the text now; errors end up in the status line.
  runValidate() {
    this.validateText().catch((err) => setText(this.status, `Could not validate: ${err.message}`));
  }

  // validateText asks the server and shows the answer if no newer request
  // was sent meanwhile.
  async validateText() {
    clearTimeout(this.timer);
    const seq = ++this.seq;
    const text = this.text.value;
    setText(this.status, 'Validating…');
    let result;
    try {
      result = await validate(text);
    } catch (err) {
      if (seq !== this.seq || this.destroyed) return;
      if (err instanceof ApiError && err.status === 404) {
        result = localValidate(text);
        result.note = 'The server has no /api/v2/validate: only the JSON syntax was checked.';
      } else {
        setText(this.status, `Could not validate: ${err.message}`);
        return;
      }
    }
    if (seq !== this.seq || this.destroyed) return;
    this.showValidation(text, result);
  }

  showValidation(text, result) {
    const keys = scanKeys(text);
    const problems = (result.Problems || []).map((p) => ({
      path: p.Path || '', message: p.Message || '', column: p.Column || 0,
      line: p.Line > 0 ? p.Line : lineOfPath(text, p.Path || '', keys),
    }));
    const warnings = (result.Warnings || []).map((w) => toWarning(w, text, keys));
    this.markGutter(problems, warnings);
    this.problems.replaceChildren(...problems.map((p) => this.item('problem', p)));
    this.warnings.replaceChildren(...warnings.map((w) => this.item('warning', w)));
    const count = (n, what) => `${n} ${what}${n === 1 ? '' : 's'}`;
    let status = problems.length ? count(problems.length, 'problem') : 'Valid';
    if (warnings.length) status += `, ${count(warnings.length, 'warning')}`;
    if (result.note) status += `. ${result.note}`;
    setText(this.status, status);
    this.status.className = problems.length ? 'status-bad' : 'status-ok';
  }

  // markGutter marks the lines of the problems and warnings in the gutter
  // (class error-line / warning-line, the messages as a tooltip) and with
  // a band behind the text.
  markGutter(problems, warnings) {
    for (const line of this.gutter.children) {
      line.classList.remove('error-line', 'warning-line');
      line.removeAttribute('title');
    }
    const style = getComputedStyle(this.text);
    const lineHeight = parseFloat(style.lineHeight) || 20;
    const top = parseFloat(style.paddingTop) || 0;
    const bands = new Map();
    const mark = (item, cls) => {
      const el = item.line > 0 ? this.gutter.children[item.line - 1] : null;
      if (!el) return;
      el.classList.remove('warning-line');
      el.classList.add(cls);
      el.title = el.title ? `${el.title}\n${item.message}` : item.message;
      bands.set(item.line, cls);
    };
    warnings.forEach((w) => mark(w, 'warning-line'));
    problems.forEach((p) => mark(p, 'error-line'));
    this.marks.replaceChildren(...[...bands].map(([line, cls]) => {
      const band = h('div', { class: `band band-${cls}` });
      band.style.top = `${top + (line - 1) * lineHeight}px`;
      band.style.height = `${lineHeight}px`;
      return band;
    }));
  }

  // item renders one problem or warning: a button to its line (when
  // known), its key path and its message.
  item(kind, p) {
    const li = h('li', { class: kind, 'data-path': p.path, 'data-line': String(p.line) });
    if (p.line > 0) {
      li.append(h('button', {
        type: 'button', class: 'line-link',
        text: p.column ? `line ${p.line}:${p.column}` : `line ${p.line}`,
        'aria-label': `Go to line ${p.line}`,
        onclick: () => this.selectLine(p.line, p.column),
      }));
    }
    if (p.path) li.append(h('code', { class: 'path', text: p.path }));
    li.append(h('span', { class: 'message', text: p.message }));
    return li;
  }

  // selectLine focuses the editor with the line selected (or the caret at
  // column) and scrolls it into view.
  selectLine(line, column = 0) {
    const value = this.text.value;
    const start = lineStartOffset(value, line);
    let end = value.indexOf('\n', start);
    if (end < 0) end = value.length;
    this.text.focus();
    if (column > 0) {
      const at = Math.min(start + column - 1, end);
      this.text.setSelectionRange(at, Math.min(at + 1, end));
    } else {
      this.text.setSelectionRange(start, end);
    }
    const lineHeight = parseFloat(getComputedStyle(this.text).lineHeight) || 20;
    this.text.scrollTop = Math.max(0, (line - 1) * lineHeight - this.text.clientHeight / 3);
    this.syncScroll();
  }

  showSubmitError(message) {
    this.submitError.textContent = message;
    this.submitError.hidden = false;
  }

  // send deploys or saves; on success it goes to the service's page with
  // the server's warnings, on a 400 it shows the message and validates.
  async send() {
    this.submitError.hidden = true;
    this.submit.disabled = true;
    const body = this.text.value;
    try {
      const answer = this.name
        ? await control('PUT', servicePath(this.region, this.name), body)
        : await control('POST', 'api/v2/services', body);
      const name = answer.ServiceName || this.name;
      if (!this.name) deployDraft = TEMPLATE;
      setFlash(this.name
        ? `Saved ${name} as version ${answer.LatestVersion}; it serves once loaded.`
        : `Created ${name} (version ${answer.CurrentVersion}); it serves once loaded.`, answer.Warnings || []);
      go(serviceHash(name));
    } catch (err) {
      this.showSubmitError(err.message);
      if (err instanceof ApiError && err.status === 400) this.runValidate();
    } finally {
      this.submit.disabled = false;
    }
  }
}

// toWarning reads a warning: an object {Path, Message} from validate or a
// "path: message" string from create/modify.
function toWarning(w, text, keys) {
  let path = '';
  let message = '';
  if (typeof w === 'string') {
    const m = /^([\w.[\]-]+): (.*)$/s.exec(w);
    path = m ? m[1] : '';
    message = m ? m[2] : w;
  } else {
    path = w.Path || '';
    message = w.Message || '';
  }
  return { path, message, column: 0, line: lineOfPath(text, path, keys) };
}

// localValidate checks only the JSON syntax, for a server without the
// validate endpoint.
function localValidate(text) {
  try {
    JSON.parse(text);
    return { Valid: true, Problems: [], Warnings: [] };
  } catch (err) {
    const msg = String(err.message);
    let line = 0;
    let column = 0;
    const lc = /line (\d+) column (\d+)/.exec(msg);
    const pos = /position (\d+)/.exec(msg);
    if (lc) {
      line = Number(lc[1]);
      column = Number(lc[2]);
    } else if (pos) {
      const before = text.slice(0, Number(pos[1])).split('\n');
      line = before.length;
      column = before[before.length - 1].length + 1;
    }
    return { Valid: false, Problems: [{ Path: '', Line: line, Column: column, Message: msg }], Warnings: [] };
  }
}
