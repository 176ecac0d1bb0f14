// api.js: the console's calls to the server. The control plane (/api/v2)
// takes the admin token, kept in sessionStorage only (never localStorage, a
// cookie or a URL); the data plane (/api/predict, /v2/models) takes the
// service's own AccessToken. Errors come back as ApiError with the server's
// message; a 401 from the control plane calls the handler set with
// onUnauthorized (the app sends the user to the login page).

import { regions } from './state.js';

const TOKEN_KEY = 'eas-console.admin-token';

// The console is served at <root>/console/, so the API is one level up;
// resolving from this module's URL also works behind a path prefix.
const ROOT = new URL('../', import.meta.url);

let unauthorizedHandler = () => {};

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

// onUnauthorized sets what happens when the control plane answers 401.
export function onUnauthorized(fn) {
  unauthorizedHandler = fn;
}

// ApiError is a failed call: status is the HTTP status (0 when the server
// could not be reached), code the ErrorObject's Code, body its whole JSON.
export class ApiError extends Error {
  constructor(status, code, message, body = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

// url makes an absolute URL for a server path ("api/v2/services").
export function url(path) {
  return new URL(path.replace(/^\//, ''), ROOT).href;
}

// send runs fetch and turns a network failure into an ApiError.
async function send(path, init) {
  try {
    return await fetch(url(path), { cache: 'no-store', credentials: 'omit', ...init });
  } catch (err) {
    if (err.name === 'AbortError') throw err; // stopped on purpose, not a failure
    throw new ApiError(0, 'NetworkError', `cannot reach the server: ${err.message}`);
  }
}

// readError builds the ApiError of a non-2xx answer from its body: the
// control plane's {Code, Message}, KServe's {error}, or plain text.
async function readError(res) {
  const text = await res.text().catch(() => '');
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  const message = (body && (body.Message || body.error)) || text.trim() || `${res.status} ${res.statusText}`;
  return new ApiError(res.status, (body && body.Code) || `HTTP${res.status}`, message, body);
}

// control calls the control plane with the admin token. body: an object
// (sent as JSON) or a string (sent as is). Answers the decoded JSON.
export async function control(method, path, body, { token = getToken() } = {}) {
  const init = { method, headers: { Authorization: token } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    init.headers['Content-Type'] = 'application/json';
  }
  const res = await send(path, init);
  if (!res.ok) {
    const err = await readError(res);
    if (res.status === 401) unauthorizedHandler(err.message);
    throw err;
  }
  const text = await res.text();
  try {
    return text ? JSON.parse(text) : {};
  } catch {
    throw new ApiError(res.status, 'BadAnswer', `the server's answer to ${method} /${path} is not JSON: ${text.slice(0, 200)}`);
  }
}

// servicePath is the control-plane path of one service.
export function servicePath(region, name, suffix = '') {
  return `api/v2/services/${encodeURIComponent(region || 'local')}/${encodeURIComponent(name)}${suffix}`;
}

export const listServices = () => control('GET', 'api/v2/services');

// regionOf answers the Region of a service for its control-plane paths:
// the one seen last, else the list's (one call); a 404 ApiError when the
// list does not hold it.
export async function regionOf(name) {
  if (!regions.has(name)) {
    const list = await listServices();
    for (const s of list.Services || []) regions.set(s.ServiceName, s.Region);
  }
  if (!regions.has(name)) throw new ApiError(404, 'NotFound', `no service named "${name}"`);
  return regions.get(name);
}

export function metrics(service, since) {
  const q = new URLSearchParams();
  if (service) q.set('service', service);
  if (since) q.set('since', String(since));
  const qs = q.toString();
  return control('GET', `api/v2/metrics${qs ? `?${qs}` : ''}`);
}

// validate asks the server to check a service.json. The server answers
// 200 either way: {Valid, Warnings} or {Valid: false, Message, Problems}.
export async function validate(text) {
  const out = await control('POST', 'api/v2/validate', text);
  return {
    Valid: out.Valid !== false,
    Message: out.Message || '',
    Warnings: out.Warnings || [],
    Problems: out.Problems || [],
  };
}

// dataPlane sends one request to a service with its AccessToken and
// answers {status, statusText, ms, contentType, requestId, bytes}. The
// latency covers the request and reading the whole answer.
export async function dataPlane(method, path, token, body) {
  const init = { method, headers: { Authorization: token } };
  if (body !== undefined) init.body = body;
  const start = performance.now();
  const res = await send(path, init);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const ms = performance.now() - start;
  return {
    status: res.status,
    statusText: res.statusText,
    ms,
    contentType: res.headers.get('Content-Type') || '',
    requestId: res.headers.get('X-Request-Id') || '',
    bytes,
  };
}

// chatCompletion posts an OpenAI chat request (an object) to a generative
// service with its AccessToken and answers the Response as it arrives,
// unread: the chat panel reads its body as a stream of server-sent events.
// signal (an AbortSignal) stops the request and the stream.
export function chatCompletion(name, token, request, signal) {
  return send(`api/predict/${encodeURIComponent(name)}/v1/chat/completions`, {
    method: 'POST',
    headers: { Authorization: token, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
    body: JSON.stringify(request),
    signal,
  });
}
