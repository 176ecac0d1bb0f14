// chat.js: the test panel's chat mode, for a generative service (processor
// llm_cpu or llm_gpu). A message list, an input, sampling controls
// (max_tokens, temperature, an optional system prompt), and the reply shown
// token by token as it streams from the service's OpenAI-compatible
// POST /api/predict/<name>/v1/chat/completions ("stream": true). The answer
// is read with fetch() and its body's ReadableStream and parsed here as
// server-sent events: EventSource can neither POST nor send the
// Authorization header that carries the service's token. Stop aborts the
// request. Every text from the server goes in as text, never as HTML.

import { chatCompletion } from './api.js';
import { h, setText } from './dom.js';

// SSEParser turns the decoded text of a server-sent event stream, given in
// pieces of any size, into the data of each event (its data: lines joined
// with "\n"), as the HTML standard's event-stream parsing does: lines end
// with CRLF, LF or CR; a blank line ends an event; comment lines (":") and
// fields other than data are skipped; an event without data is none.
export class SSEParser {
  constructor() {
    this.buffer = ''; // the unfinished line
    this.data = []; // the current event's data lines
    this.skipLF = false; // the last piece ended with CR: a LF first in the next one ends nothing
  }

  // push takes the next piece of text and answers the data of each event
  // it completes, in order.
  push(text) {
    const events = [];
    let s = text;
    if (this.skipLF && s) {
      if (s[0] === '\n') s = s.slice(1);
      this.skipLF = false;
    }
    s = this.buffer + s;
    let start = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s[i];
      if (c !== '\n' && c !== '\r') continue;
      this.line(s.slice(start, i), events);
      if (c === '\r') {
        if (i + 1 === s.length) this.skipLF = true;
        else if (s[i + 1] === '\n') i++;
      }
      start = i + 1;
    }
    this.buffer = s.slice(start);
    return events;
  }

  line(line, events) {
    if (line === '') {
      if (this.data.length) events.push(this.data.join('\n'));
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return; // a comment: a keep-alive
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
  }
}

// readEvents reads a response body (a ReadableStream of bytes) to its end
// and calls onData with the data of each event. The bytes are decoded as
// UTF-8 with stream: true, so a character split across two reads comes out
// whole. onData answering false stops the reading (after [DONE]); onData
// throwing stops it too, and the error is readEvents'. An abort of signal
// cancels the stream: readEvents then returns (or rejects with the
// AbortError fetch gives).
export async function readEvents(body, onData, signal) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SSEParser();
  const cancel = () => { reader.cancel().catch(() => {}); };
  if (signal) {
    if (signal.aborted) cancel();
    else signal.addEventListener('abort', cancel, { once: true });
  }
  try {
    for (;;) {
      const { done, value } = await reader.read();
      const text = done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (const data of parser.push(text)) {
        if (onData(data) === false) {
          cancel();
          return;
        }
      }
      if (done) return;
    }
  } catch (err) {
    cancel();
    throw err;
  } finally {
    if (signal) signal.removeEventListener('abort', cancel);
  }
}

// chunkOf reads one event's data: {done: true} for [DONE], {error} (a
// message) for an error event, else the first choice's {role, content,
// finish} (finish_reason; '' while it is null).
export function chunkOf(data) {
  if (data.trim() === '[DONE]') return { done: true };
  let msg;
  try {
    msg = JSON.parse(data);
  } catch {
    throw new Error(`the server sent an event that is not JSON: ${data.slice(0, 200)}`);
  }
  if (msg && typeof msg === 'object' && msg.error) return { error: errorText(msg.error) };
  const choice = (msg && Array.isArray(msg.choices) && msg.choices[0]) || {};
  const delta = choice.delta || {};
  return {
    role: typeof delta.role === 'string' ? delta.role : '',
    content: typeof delta.content === 'string' ? delta.content : '',
    finish: typeof choice.finish_reason === 'string' ? choice.finish_reason : '',
  };
}

// errorText writes an OpenAI error object ({message, type, code}) as one
// line: "message (type, code)".
function errorText(e) {
  if (typeof e === 'string') return e;
  if (!e || typeof e !== 'object') return String(e);
  const message = typeof e.message === 'string' && e.message ? e.message : JSON.stringify(e);
  const kind = [e.type, e.code].filter((v) => v !== undefined && v !== null && v !== '').join(', ');
  return kind ? `${message} (${kind})` : message;
}

// httpError reads the error of an answer that is not 2xx: OpenAI's
// {"error": {...}}, the EAS door's {"Code", "Message"}, or its text.
export async function httpError(res) {
  const text = await res.text().catch(() => '');
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  let why;
  if (body && body.error) why = errorText(body.error);
  else if (body && typeof body.Message === 'string') why = body.Code ? `${body.Message} (${body.Code})` : body.Message;
  else why = text.trim().slice(0, 2000) || 'no message';
  return new Error(`${`${res.status} ${res.statusText}`.trim()}: ${why}`);
}

// keep adds a finished (or stopped) exchange to a conversation; a reply
// stopped before its first token adds nothing.
function keep(conversation, text, answer, stopped) {
  if (stopped && !answer) return;
  conversation.push({ role: 'user', content: text }, { role: 'assistant', content: answer });
}

const ROLES = { user: 'You', assistant: 'Model' };

export class ChatPanel {
  // service() answers the latest ServiceObject (for its name and token).
  constructor(service) {
    this.service = service;
    this.messages = []; // the conversation sent with the next message
    this.controller = null; // the AbortController of the reply streaming now
    this.build();
  }

  build() {
    this.log = h('ol', { id: 'chat-log', class: 'chat-log', tabindex: '0', 'aria-label': 'Conversation', 'aria-live': 'polite' });
    this.input = h('textarea', { id: 'chat-input', rows: '3', placeholder: 'Enter sends; Shift+Enter starts a new line' });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.ctrlKey && !e.altKey && !e.metaKey && !e.isComposing) {
        e.preventDefault();
        this.send();
      }
    });
    this.system = h('input', { id: 'chat-system', type: 'text', spellcheck: 'false', placeholder: 'none' });
    this.maxTokens = h('input', { id: 'chat-max-tokens', type: 'number', min: '1', step: '1', value: '256', class: 'chat-number' });
    this.temperature = h('input', { id: 'chat-temperature', type: 'number', min: '0', max: '2', step: '0.1', value: '0.7', class: 'chat-number' });
    this.sendButton = h('button', { type: 'button', id: 'chat-send', class: 'primary', text: 'Send', onclick: () => this.send() });
    this.stopButton = h('button', { type: 'button', id: 'chat-stop', text: 'Stop', disabled: true, onclick: () => this.stop() });
    this.clearButton = h('button', { type: 'button', id: 'chat-clear', text: 'Clear', onclick: () => this.clear() });
    this.status = h('p', { id: 'chat-status', class: 'chat-status muted', role: 'status' });
    this.element = h('div', { class: 'chat' },
      this.log,
      h('div', { class: 'field' }, h('label', { for: 'chat-input', text: 'Message' }), this.input),
      h('div', { class: 'chat-settings' },
        h('div', { class: 'field' }, h('label', { for: 'chat-max-tokens', text: 'max_tokens' }), this.maxTokens),
        h('div', { class: 'field' }, h('label', { for: 'chat-temperature', text: 'temperature' }), this.temperature),
        h('div', { class: 'field chat-system' }, h('label', { for: 'chat-system', text: 'System prompt' }), this.system)),
      h('div', { class: 'actions' }, this.sendButton, this.stopButton, this.clearButton),
      this.status);
    this.showEmpty();
  }

  showEmpty() {
    if (!this.log.children.length) {
      this.log.append(h('li', { class: 'chat-empty muted', text: 'No messages yet. The reply streams in as the model writes it.' }));
    }
  }

  // settings reads the sampling controls; an empty field is left out of
  // the request (the service's default).
  settings() {
    const out = {};
    const max = this.maxTokens.value.trim();
    if (max) {
      const n = Number(max);
      if (!Number.isInteger(n) || n < 1) throw new Error('max_tokens must be a whole number of 1 or more');
      out.max_tokens = n;
    }
    const temp = this.temperature.value.trim();
    if (temp) {
      const t = Number(temp);
      if (!Number.isFinite(t) || t < 0 || t > 2) throw new Error('temperature must be a number from 0 to 2');
      out.temperature = t;
    }
    return out;
  }

  // send sends the input as the next user message, with the conversation
  // so far, and streams the reply.
  async send() {
    if (this.controller) return;
    const text = this.input.value.trim();
    if (!text) {
      this.input.focus();
      return;
    }
    let settings;
    try {
      settings = this.settings();
    } catch (err) {
      this.setStatus(err.message, true);
      return;
    }
    const { ServiceName: name, AccessToken: token } = this.service();
    const system = this.system.value.trim();
    const request = {
      model: name,
      messages: [...(system ? [{ role: 'system', content: system }] : []), ...this.messages, { role: 'user', content: text }],
      stream: true,
      ...settings,
    };
    this.input.value = '';
    await this.exchange(text, (signal) => chatCompletion(name, token, request, signal));
  }

  // exchange shows text as the user's message and streams the reply of
  // call(signal), a promise of the fetch Response. A reply that fails
  // shows its error and leaves the conversation as it was (the text goes
  // back to an empty input); a stopped reply keeps what came.
  async exchange(text, call) {
    this.log.querySelectorAll('.chat-empty').forEach((e) => e.remove());
    const user = this.bubble('user', text);
    const reply = this.bubble('assistant', '');
    const content = reply.querySelector('.chat-text');
    reply.classList.add('streaming');
    reply.setAttribute('aria-busy', 'true');
    const controller = new AbortController();
    this.controller = controller;
    const conversation = this.messages; // Clear starts another
    this.busy(true);
    this.setStatus('Waiting for the first token…');
    const start = performance.now();
    let first = 0;
    let chunks = 0;
    let finish = '';
    let done = false;
    let answer = '';
    const add = (piece) => {
      if (!piece) return;
      if (!first) {
        first = performance.now();
        this.setStatus(`First token after ${(first - start).toFixed(0)} ms; streaming…`);
      }
      chunks++;
      answer += piece;
      const follow = this.atBottom();
      content.append(piece);
      if (follow) this.log.scrollTop = this.log.scrollHeight;
    };
    try {
      const res = await call(controller.signal);
      if (!res.ok) throw await httpError(res);
      if (!(res.headers.get('Content-Type') || '').includes('text/event-stream')) {
        // A server that answered in one piece: OpenAI's chat.completion.
        const whole = await res.text();
        let msg = null;
        try {
          msg = JSON.parse(whole);
        } catch {
          throw new Error(`the answer is neither an event stream nor JSON: ${whole.slice(0, 200)}`);
        }
        if (msg && msg.error) throw new Error(errorText(msg.error));
        const choice = (msg && Array.isArray(msg.choices) && msg.choices[0]) || {};
        add((choice.message && typeof choice.message.content === 'string') ? choice.message.content : '');
        finish = choice.finish_reason || '';
        done = true;
      } else {
        await readEvents(res.body, (data) => {
          const c = chunkOf(data);
          if (c.done) {
            done = true;
            return false;
          }
          if (c.error) throw new Error(`the server stopped the reply: ${c.error}`);
          add(c.content);
          if (c.finish) finish = c.finish;
          return true;
        }, controller.signal);
      }
      const stopped = controller.signal.aborted;
      keep(conversation, text, answer, stopped);
      const facts = [this.timing(start, first, chunks)];
      if (finish) facts.push(`finish: ${finish}`);
      if (stopped) facts.unshift('Stopped');
      else if (!done) facts.unshift('The stream ended without [DONE]');
      if (stopped) this.mark(reply, 'stopped');
      this.setStatus(facts.join(' · '), !stopped && !done);
    } catch (err) {
      if (controller.signal.aborted || err.name === 'AbortError') {
        keep(conversation, text, answer, true);
        this.mark(reply, 'stopped');
        this.setStatus(`Stopped · ${this.timing(start, first, chunks)}`);
      } else {
        reply.classList.add('chat-failed');
        reply.append(h('p', { class: 'chat-error', text: err.message }));
        user.classList.add('chat-unsent');
        if (!this.input.value) this.input.value = text;
        this.setStatus(`Error: ${err.message}`, true);
      }
    } finally {
      if (this.controller === controller) this.controller = null;
      reply.classList.remove('streaming');
      reply.removeAttribute('aria-busy');
      this.busy(false);
    }
  }

  mark(reply, what) {
    reply.classList.add(`chat-${what}`);
    reply.append(h('span', { class: 'chat-note muted', text: `(${what})` }));
  }

  timing(start, first, chunks) {
    const now = performance.now();
    if (!first) return `no token after ${((now - start) / 1000).toFixed(2)} s`;
    const stream = (now - first) / 1000;
    const rate = chunks > 1 && stream > 0 ? ` (${((chunks - 1) / stream).toFixed(1)}/s after the first)` : '';
    return `first token after ${(first - start).toFixed(0)} ms · ${chunks} chunk${chunks === 1 ? '' : 's'} in ${((now - start) / 1000).toFixed(2)} s${rate}`;
  }

  bubble(role, text) {
    const li = h('li', { class: `chat-msg chat-${role}`, 'data-role': role },
      h('span', { class: 'chat-role', text: ROLES[role] || role }),
      h('div', { class: 'chat-text', text }));
    this.log.append(li);
    this.log.scrollTop = this.log.scrollHeight;
    return li;
  }

  atBottom() {
    return this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 24;
  }

  busy(on) {
    this.sendButton.disabled = on;
    this.stopButton.disabled = !on;
  }

  setStatus(text, bad = false) {
    setText(this.status, text);
    this.status.classList.toggle('chat-status-bad', bad);
  }

  // stop aborts the reply streaming now.
  stop() {
    if (this.controller) this.controller.abort();
  }

  // clear stops any reply and forgets the conversation.
  clear() {
    this.stop();
    this.messages = [];
    this.log.replaceChildren();
    this.showEmpty();
    this.setStatus('');
  }
}
