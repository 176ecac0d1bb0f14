// testpanel.js: the detail page's test panel. It sends a request to the
// service with the service's own AccessToken, either a raw body to
// POST /api/predict/<name> or, in "KServe v2 form" mode, an infer request
// built from the model's inputs (GET /v2/models/<name>) to
// POST /v2/models/<name>/infer, and shows the status, the latency
// (performance.now() around the call) and the answer. A generative service
// (llm_*) also has a chat mode (chat.js), in which it starts.

import { dataPlane } from './api.js';
import { h, setText, formatJSON } from './dom.js';
import { ChatPanel } from './chat.js';

const DEFAULT_BODY = '{"hello": "console"}';
const SHOW_MAX = 256 * 1024; // characters of an answer shown

export class TestPanel {
  // service() answers the latest ServiceObject (for its name and token).
  constructor(service) {
    this.service = service;
    this.model = null; // the KServe metadata, once loaded
    this.build();
  }

  build() {
    this.mode = h('select', { id: 'test-mode' },
      h('option', { value: 'raw', text: 'Raw body: POST /api/predict' }),
      h('option', { value: 'kserve', text: 'KServe v2 form: POST /v2/models/…/infer' }));
    this.body = h('textarea', { id: 'test-body', rows: '6', spellcheck: 'false', class: 'code' });
    this.body.value = DEFAULT_BODY;
    this.rawPane = h('div', { class: 'field' },
      h('label', { for: 'test-body', text: 'Request body' }), this.body);
    this.kserveInfo = h('p', { id: 'kserve-info', class: 'muted', role: 'status' });
    this.kserveInputs = h('div', { id: 'kserve-inputs', class: 'kserve-inputs' });
    this.kservePane = h('div', { class: 'field', hidden: true },
      this.kserveInfo, this.kserveInputs,
      h('button', { type: 'button', id: 'kserve-reload', class: 'link-button', text: 'Reload the model\'s inputs', onclick: () => this.run(() => this.loadModel()) }));
    this.chat = new ChatPanel(this.service);
    this.chatPane = h('div', { id: 'chat-pane', hidden: true }, this.chat.element);
    this.send = h('button', { type: 'button', id: 'test-send', class: 'primary', text: 'Send', onclick: () => this.run(() => this.sendRequest()) });
    this.metaButton = h('button', { type: 'button', id: 'test-metadata', text: 'Get model metadata', onclick: () => this.run(() => this.getMetadata()) });
    this.status = h('span', { id: 'test-status' });
    this.latency = h('span', { id: 'test-latency' });
    this.request = h('span', { id: 'test-request-id', class: 'muted' });
    this.answer = h('pre', { id: 'test-answer', class: 'code answer', tabindex: '0', 'aria-label': 'Answer' });
    this.mode.addEventListener('change', () => { this.modeChosen = true; this.run(() => this.switchMode()); });
    this.actions = h('div', { class: 'actions' }, this.send, this.metaButton);
    this.result = h('div', { class: 'result', 'aria-live': 'polite' },
      h('dl', { class: 'facts compact' },
        h('dt', { text: 'Status' }), h('dd', {}, this.status),
        h('dt', { text: 'Latency' }), h('dd', {}, this.latency),
        h('dt', { text: 'Request id' }), h('dd', {}, this.request)),
      this.answer);
    this.element = h('section', { class: 'panel', 'aria-labelledby': 'test-title' },
      h('h2', { id: 'test-title', text: 'Test' }),
      h('div', { class: 'field inline' }, h('label', { for: 'test-mode', text: 'Mode' }), this.mode),
      this.rawPane, this.kservePane, this.chatPane,
      this.actions, this.result);
  }

  // chooseMode picks the mode a first Send should use, once, when the
  // service's processor is known: the KServe v2 form for the tensor codes,
  // whose EAS door takes a protobuf no one types by hand; the chat for the
  // generative codes (llm_*), which only they have; the raw body for the
  // others. A mode the user picked is left alone.
  chooseMode(processor) {
    if (!processor) return;
    const generative = /^llm_/.test(processor);
    if (generative && !this.mode.querySelector('option[value="chat"]')) {
      this.mode.prepend(h('option', { value: 'chat', text: 'Chat: POST /api/predict/…/v1/chat/completions' }));
    }
    if (this.modeChosen) return;
    this.modeChosen = true;
    if (/^(pytorch_|tensorflow_|onnx_|caffe_)/.test(processor)) {
      this.mode.value = 'kserve';
      this.run(() => this.switchMode());
    } else if (generative) {
      this.mode.value = 'chat';
      this.run(() => this.switchMode());
    }
  }

  // run executes one action with the buttons disabled, showing any error.
  async run(action) {
    this.send.disabled = true;
    this.metaButton.disabled = true;
    try {
      await action();
    } catch (err) {
      this.showError(err.message);
    } finally {
      this.send.disabled = false;
      this.metaButton.disabled = false;
    }
  }

  showError(message) {
    setText(this.status, 'error');
    this.status.className = 'badge badge-bad';
    setText(this.latency, '');
    setText(this.request, '');
    setText(this.answer, message);
  }

  async switchMode() {
    const kserve = this.mode.value === 'kserve';
    const chat = this.mode.value === 'chat';
    this.rawPane.hidden = kserve || chat;
    this.kservePane.hidden = !kserve;
    // The chat has its own buttons and shows its answers in its list.
    this.chatPane.hidden = !chat;
    this.actions.hidden = chat;
    this.result.hidden = chat;
    if (kserve && !this.model) await this.loadModel();
  }

  // loadModel reads the model's KServe metadata and builds one row per
  // input; a second call while one runs waits for that one.
  loadModel() {
    if (!this.loading) {
      this.loading = this.fetchModel().finally(() => { this.loading = null; });
    }
    return this.loading;
  }

  async fetchModel() {
    const { ServiceName: name, AccessToken: token } = this.service();
    setText(this.kserveInfo, 'Loading the model\'s inputs…');
    this.kserveInputs.replaceChildren();
    const res = await dataPlane('GET', `v2/models/${encodeURIComponent(name)}`, token);
    const text = new TextDecoder().decode(res.bytes);
    let meta = null;
    try {
      meta = JSON.parse(text);
    } catch {
      meta = null;
    }
    if (res.status !== 200 || !meta) {
      this.model = null;
      const why = (meta && meta.error) || text.trim() || `HTTP ${res.status}`;
      setText(this.kserveInfo, `No KServe v2 form for this service (${res.status}): ${why}. Use the raw body mode.`);
      return;
    }
    this.model = meta;
    const inputs = Array.isArray(meta.inputs) ? meta.inputs : [];
    setText(this.kserveInfo, `Model ${meta.name || name}${meta.platform ? ` (${meta.platform})` : ''}: ${inputs.length} input${inputs.length === 1 ? '' : 's'}. Give each input's values separated by commas; -1 in a shape is worked out from the count.`);
    this.kserveInputs.replaceChildren(...inputs.map((inp, i) => inputRow(inp, i)));
  }

  async sendRequest() {
    const { ServiceName: name, AccessToken: token } = this.service();
    if (this.mode.value === 'kserve') {
      if (!this.model) await this.loadModel();
      if (!this.model) throw new Error('the model has no KServe v2 metadata; use the raw body mode');
      const body = JSON.stringify(buildInfer(this.kserveInputs));
      this.show(await dataPlane('POST', `v2/models/${encodeURIComponent(name)}/infer`, token, body));
    } else {
      this.show(await dataPlane('POST', `api/predict/${encodeURIComponent(name)}`, token, this.body.value));
    }
  }

  async getMetadata() {
    const { ServiceName: name, AccessToken: token } = this.service();
    this.show(await dataPlane('GET', `api/predict/${encodeURIComponent(name)}`, token));
  }

  show(res) {
    setText(this.status, `${res.status} ${res.statusText}`.trim());
    this.status.className = `badge ${res.status >= 200 && res.status < 300 ? 'badge-ok' : 'badge-bad'}`;
    setText(this.latency, `${res.ms.toFixed(1)} ms`);
    setText(this.request, res.requestId);
    setText(this.answer, describeAnswer(res.bytes, res.contentType));
  }
}

// inputRow is one KServe input: its name, datatype and shape shown, an
// editable shape and a field for the values.
function inputRow(input, i) {
  const id = `kserve-input-${i}`;
  const shape = Array.isArray(input.shape) ? input.shape : [];
  const values = h('input', { id, type: 'text', class: 'kserve-values', spellcheck: 'false', placeholder: placeholderFor(input.datatype) });
  const shapeField = h('input', { id: `${id}-shape`, type: 'text', class: 'kserve-shape', spellcheck: 'false', value: shape.join(', '), 'aria-label': `Shape of ${input.name}` });
  const row = h('div', { class: 'kserve-input', 'data-input': input.name || '', 'data-datatype': input.datatype || '' },
    h('label', { for: id }, h('code', { text: input.name || '(unnamed)' }), ' ',
      h('span', { class: 'muted', text: `${input.datatype || '?'} [${shape.join(', ')}]` })),
    values,
    h('span', { class: 'shape-label muted', 'aria-hidden': 'true', text: 'shape' }),
    shapeField);
  return row;
}

function placeholderFor(datatype) {
  if (datatype === 'BYTES') return 'text, more text';
  if (datatype === 'BOOL') return 'true, false';
  return '1, 2, 3';
}

// buildInfer reads the input rows into {"inputs": [...]}.
function buildInfer(container) {
  const inputs = [...container.querySelectorAll('.kserve-input')].map((row) => {
    const name = row.dataset.input;
    const datatype = row.dataset.datatype;
    const data = parseValues(row.querySelector('.kserve-values').value, datatype, name);
    const shape = resolveShape(row.querySelector('.kserve-shape').value, data.length, name);
    return { name, shape, datatype, data };
  });
  return { inputs };
}

// parseValues splits comma-separated values and converts them for the
// datatype: strings for BYTES, booleans for BOOL, numbers otherwise.
function parseValues(text, datatype, name) {
  const parts = text.split(',').map((s) => s.trim());
  if (parts.length === 1 && parts[0] === '') return [];
  return parts.map((s) => {
    if (datatype === 'BYTES') return s;
    if (datatype === 'BOOL') {
      if (/^(true|1)$/i.test(s)) return true;
      if (/^(false|0)$/i.test(s)) return false;
      throw new Error(`input ${name}: "${s}" is not a boolean (true or false)`);
    }
    const n = Number(s);
    if (s === '' || !Number.isFinite(n)) throw new Error(`input ${name}: "${s}" is not a number`);
    return n;
  });
}

// resolveShape reads a shape ("1, -1" or "[1, -1]") and replaces one -1
// with what the value count makes it.
function resolveShape(text, count, name) {
  const dims = text.replace(/[[\]\s]/g, '').split(',').filter(Boolean).map(Number);
  if (dims.some((d) => !Number.isInteger(d) || d < -1)) throw new Error(`input ${name}: the shape must be integers, e.g. 1, 3`);
  if (dims.length === 0) return [count];
  const free = dims.filter((d) => d === -1).length;
  const known = dims.filter((d) => d !== -1).reduce((a, b) => a * b, 1);
  if (free > 1) throw new Error(`input ${name}: the shape has more than one -1; give all but one dimension`);
  if (free === 1) {
    if (known === 0 || count % known !== 0) throw new Error(`input ${name}: ${count} values do not fit the shape [${dims.join(', ')}]`);
    return dims.map((d) => (d === -1 ? count / known : d));
  }
  if (known !== count) throw new Error(`input ${name}: the shape [${dims.join(', ')}] holds ${known} values, ${count} given`);
  return dims;
}

// describeAnswer renders an answer body: pretty JSON, text, or a note with
// the first bytes for binary answers.
export function describeAnswer(bytes, contentType) {
  if (bytes.length === 0) return '(empty answer)';
  let text = null;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    text = null;
  }
  // eslint-disable-next-line no-control-regex
  if (text !== null && !/[\u0000-\u0008\u000e-\u001f]/.test(text)) {
    let shown = text;
    try {
      shown = formatJSON(JSON.parse(text));
    } catch {
      shown = text;
    }
    return shown.length > SHOW_MAX
      ? `${shown.slice(0, SHOW_MAX)}\n… (${bytes.length} bytes in all; the rest is not shown)`
      : shown;
  }
  const head = [...bytes.slice(0, 64)].map((b) => b.toString(16).padStart(2, '0')).join(' ');
  return `(binary answer: ${bytes.length} bytes${contentType ? `, ${contentType}` : ''})\nfirst bytes: ${head}${bytes.length > 64 ? ' …' : ''}`;
}
