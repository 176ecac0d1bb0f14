// jsonscan.js: maps the dotted key paths the server names in its problems
// ("metadata.rpc.keepalive") to line numbers of the JSON text in the editor.
// The scanner is a tolerant tokenizer, not a parser: it keeps going through
// invalid JSON, so half-typed documents still get their problems placed.
// Dotted keys are joined like nested ones ("metadata": {"rpc.keepalive"}
// is metadata.rpc.keepalive), as the server reads them.

// readString reads the JSON string starting at text[i] (a quote) and
// answers its value and the index after it; an unterminated string ends at
// the end of its line.
function readString(text, i) {
  let j = i + 1;
  while (j < text.length && text[j] !== '"' && text[j] !== '\n') {
    j += text[j] === '\\' ? 2 : 1;
  }
  const raw = text.slice(i + 1, Math.min(j, text.length));
  let value = raw;
  try {
    value = JSON.parse(`"${raw}"`);
  } catch {
    value = raw;
  }
  return { value, end: text[j] === '"' ? j + 1 : j };
}

function join(prefix, key) {
  return prefix ? `${prefix}.${key}` : key;
}

// childPath is the path of a value that starts inside frame (or at the
// top when there is no frame).
function childPath(frame) {
  if (!frame) return '';
  if (frame.kind === 'arr') return `${frame.path}[${frame.index}]`;
  return join(frame.path, frame.key ?? '');
}

// scanKeys answers a Map from each key path in text to {line, column} of
// its key (1-based; the first occurrence wins). In an object, a string is a
// key where a key is expected (after "{" or ",") or when a colon follows
// it, which keeps the paths right after a missing comma.
export function scanKeys(text) {
  const keys = new Map();
  const stack = [];
  let line = 1;
  let lineStart = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const top = stack[stack.length - 1];
    if (c === '\n') {
      line++;
      lineStart = i + 1;
    } else if (c === '"') {
      const { value, end } = readString(text, i);
      if (top && top.kind === 'obj' && (top.expectKey || /^\s*:/.test(text.slice(end, end + 64)))) {
        top.key = value;
        top.expectKey = false;
        const path = join(top.path, value);
        if (!keys.has(path)) keys.set(path, { line, column: i - lineStart + 1 });
      }
      i = end;
      continue;
    } else if (c === '{' || c === '[') {
      stack.push({ kind: c === '{' ? 'obj' : 'arr', path: childPath(top), key: null, expectKey: c === '{', index: 0 });
    } else if (c === '}' || c === ']') {
      stack.pop();
    } else if (c === ',' && top) {
      if (top.kind === 'obj') {
        top.expectKey = true;
        top.key = null;
      } else {
        top.index++;
      }
    }
    i++;
  }
  return keys;
}

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// lineOfText answers the line of the first match of re in text, or 0.
function lineOfText(text, re) {
  const m = re.exec(text);
  return m ? text.slice(0, m.index).split('\n').length : 0;
}

// lineOfPath finds the line of a key path: the key itself; else a plain
// search for its last segment written as a key; else the nearest enclosing
// key that is in the text (a required key that is missing shows at its
// section); 0 when nothing fits. keys is scanKeys(text), passed in when
// many paths are looked up in one text.
export function lineOfPath(text, path, keys = scanKeys(text)) {
  if (!path) return 0;
  const exact = keys.get(path);
  if (exact) return exact.line;
  const last = path.split('.').pop().replace(/\[\d+\]$/, '');
  if (last) {
    const line = lineOfText(text, new RegExp(`"(?:[^"\\n]*\\.)?${escapeRegExp(last)}"\\s*:`));
    if (line) return line;
  }
  const segs = path.split('.');
  for (let n = segs.length - 1; n > 0; n--) {
    const found = keys.get(segs.slice(0, n).join('.'));
    if (found) return found.line;
  }
  return 0;
}

// lineStartOffset answers the character offset where a 1-based line
// starts, for selecting it in the textarea.
export function lineStartOffset(text, line) {
  let offset = 0;
  for (let n = 1; n < line; n++) {
    const next = text.indexOf('\n', offset);
    if (next < 0) return text.length;
    offset = next + 1;
  }
  return offset;
}
