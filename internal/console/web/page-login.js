// page-login.js: the login page. It asks for the admin token, checks it with
// one control-plane call, keeps it in sessionStorage (api.js) and goes on to
// the page the user wanted.

import { ApiError, control, setToken } from './api.js';
import { h } from './dom.js';
import { go, session } from './state.js';

export function mount(main) {
  const input = h('input', {
    id: 'login-token', type: 'password', required: true,
    autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'login-help login-error',
  });
  const error = h('p', { id: 'login-error', class: 'form-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'primary', text: 'Log in' });
  const form = h('form', { id: 'login-form', class: 'login-form', novalidate: true },
    h('label', { for: 'login-token', text: 'Admin token' }),
    input,
    h('p', { id: 'login-help', class: 'help' },
      'The server\'s admin token: EAS_ADMIN_TOKEN, or the admin_token file in its state directory. ',
      'It is kept in this tab only, until you log out or close it.'),
    error,
    submit);

  if (session.loginMessage) {
    error.textContent = session.loginMessage;
    session.loginMessage = '';
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    login(input, error, submit).catch((err) => {
      error.textContent = err.message;
    });
  });

  main.append(h('section', { class: 'login' },
    h('h1', { tabindex: '-1', text: 'Log in' }), form));
  input.focus();
  return () => {};
}

// login checks the token with GET /api/v2/services and keeps it when the
// server accepts it.
async function login(input, error, submit) {
  const token = input.value.trim();
  if (!token) {
    error.textContent = 'Enter the admin token.';
    input.focus();
    return;
  }
  error.textContent = '';
  submit.disabled = true;
  try {
    await control('GET', 'api/v2/services', undefined, { token });
    setToken(token);
    const next = session.afterLogin && session.afterLogin !== '#/login' ? session.afterLogin : '#/services';
    session.afterLogin = '#/services';
    go(next);
  } catch (err) {
    error.textContent = err instanceof ApiError && err.status === 401
      ? `The server refused the token: ${err.message}`
      : err.message;
    input.focus();
    input.select();
  } finally {
    submit.disabled = false;
  }
}
