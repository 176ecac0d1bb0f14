// app.js: the console's entry point. It routes the location hash to a page
// (#/login, #/services, #/services/<name>, #/services/<name>/edit,
// #/deploy), unmounting the previous page (its timers stop), sends the user
// to the login page when there is no admin token or the server answers
// 401, and runs the top bar (navigation, menu toggle, logout).

import { clearToken, getToken, onUnauthorized } from './api.js';
import { h } from './dom.js';
import { setupDialog, closeDialog } from './dialog.js';
import { go, session, takeFlash } from './state.js';
import * as login from './page-login.js';
import * as services from './page-services.js';
import * as detail from './page-detail.js';
import * as editor from './page-editor.js';

// ROUTES: pattern, page module, title, nav entry; the captured group is
// the service name.
const ROUTES = [
  { re: /^#\/login$/, page: login, title: 'Log in', open: true },
  { re: /^#\/services$/, page: services, title: 'Services', nav: 'services' },
  { re: /^#\/deploy$/, page: editor, title: 'Deploy', nav: 'deploy' },
  { re: /^#\/services\/([^/]+)\/edit$/, page: editor, title: 'Modify', nav: 'services' },
  { re: /^#\/services\/([^/]+)$/, page: detail, title: 'Service', nav: 'services' },
];

let unmount = null;

function main() {
  return document.getElementById('main');
}

// route mounts the page of the current hash.
function route() {
  const hash = location.hash || '';
  if (hash === '' || hash === '#' || hash === '#/') {
    go('#/services', { replace: true });
    return;
  }
  const match = ROUTES.map((r) => ({ r, m: r.re.exec(hash) })).find((x) => x.m);
  if (match && !match.r.open && !getToken()) {
    session.afterLogin = hash;
    go('#/login', { replace: true });
    return;
  }
  if (unmount) unmount();
  unmount = null;
  closeDialog();
  closeMenu();
  const root = main();
  root.replaceChildren();
  document.body.classList.toggle('logged-in', Boolean(getToken()));
  markNav(match ? match.r.nav : null);
  if (!match) {
    notFound(root, hash);
    return;
  }
  document.title = `${match.r.title} · eas-server console`;
  const params = match.m[1] ? { name: decodeURIComponent(match.m[1]) } : {};
  try {
    unmount = match.r.page.mount(root, params) || null;
  } catch (err) {
    root.append(h('p', { class: 'notice notice-error', role: 'alert', text: `This page failed: ${err.message}` }));
  }
  const heading = root.querySelector('h1');
  if (heading && !root.contains(document.activeElement)) heading.focus({ preventScroll: true });
  window.scrollTo(0, 0);
}

function notFound(root, hash) {
  document.title = 'Not found · eas-server console';
  root.append(h('h1', { tabindex: '-1', text: 'Not found' }),
    h('p', {}, `There is no page at ${hash}. `, h('a', { href: '#/services', text: 'Go to the services' }), '.'));
}

function markNav(current) {
  for (const link of document.querySelectorAll('#nav a[data-nav]')) {
    if (link.dataset.nav === current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

function closeMenu() {
  const toggle = document.getElementById('nav-toggle');
  toggle.setAttribute('aria-expanded', 'false');
  document.body.classList.remove('menu-open');
}

function setupShell() {
  const toggle = document.getElementById('nav-toggle');
  toggle.addEventListener('click', () => {
    const open = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(open));
    document.body.classList.toggle('menu-open', open);
  });
  document.getElementById('logout').addEventListener('click', () => {
    clearToken();
    takeFlash();
    session.loginMessage = 'You are logged out.';
    session.afterLogin = '#/services';
    document.body.classList.remove('logged-in');
    go('#/login');
  });
  document.getElementById('skip-link').addEventListener('click', () => {
    const target = main().querySelector('h1') || main();
    target.focus();
  });
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && document.body.classList.contains('menu-open')) {
      closeMenu();
      toggle.focus();
    }
  });
}

onUnauthorized((message) => {
  clearToken();
  document.body.classList.remove('logged-in');
  if (location.hash === '#/login') return;
  session.loginMessage = message;
  session.afterLogin = location.hash || '#/services';
  go('#/login');
});

// A rejection no page caught still shows, instead of only in the console.
window.addEventListener('unhandledrejection', (event) => {
  event.preventDefault();
  const msg = event.reason && event.reason.message ? event.reason.message : String(event.reason);
  const root = main();
  if (root) root.prepend(h('p', { class: 'notice notice-error', role: 'alert', text: `Unexpected error: ${msg}` }));
});

setupDialog();
setupShell();
window.addEventListener('hashchange', route);
route();
