// state.js: what the pages share for the life of the tab (in memory only):
// navigation, a one-time "flash" message for the next page, the region of
// each service seen, the login page's message and the route to return to.

export const session = {
  loginMessage: '', // shown once on the login page (a 401's message, "logged out")
  afterLogin: '#/services', // where a successful login goes
  listFilter: '', // the services list's filter text, kept across pages
};

// regions maps a service name to the Region its ServiceObject gave, for the
// control-plane paths /api/v2/services/<Region>/<name>.
export const regions = new Map();

let flashed = null;

// setFlash leaves a message (and warnings) for the next page to show.
export function setFlash(message, warnings = []) {
  flashed = { message, warnings };
}

// takeFlash answers the flashed message once, then forgets it.
export function takeFlash() {
  const f = flashed;
  flashed = null;
  return f;
}

// go navigates to a hash route (replace: without a history entry).
export function go(hash, { replace = false } = {}) {
  if (location.hash === hash) return;
  if (replace) {
    history.replaceState(null, '', hash);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    location.hash = hash;
  }
}

// serviceHash is the route of a service's detail page (suffix: "/edit").
export function serviceHash(name, suffix = '') {
  return `#/services/${encodeURIComponent(name)}${suffix}`;
}
