// The console's shell: the session (token, org, sandbox in sessionStorage), the API client, sign-in and sign-out,
// and the router that shows a view for the URL's fragment (#/datasets, ...). Views live in their own modules.

import { h } from './format.js';
import { datasetsView } from './datasets.js';

const store = window.sessionStorage;

/** The signed-in session, or null: the token, the org and scopes read from it, and the chosen sandbox. */
export function session() {
  const token = store.getItem('token');
  if (!token) return null;
  const claims = decodeClaims(token) || {};
  return {
    token,
    org: claims.org || '',
    user: claims.sub || '',
    scopes: String(claims.scope || '').split(' ').filter(Boolean),
    sandbox: store.getItem('sandbox') || 'prod',
  };
}

/** Whether the session's token carries scope; the API decides in the end, this only spares a refused request. */
export function can(scope) {
  const s = session();
  return !!s && s.scopes.includes(scope);
}

// decodeClaims reads a JWT's payload without checking it: the API checks the signature on every call.
function decodeClaims(token) {
  try {
    const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(payload));
  } catch {
    return null;
  }
}

/**
 * Calls the service's API as the session: {status, ok, data, headers}. data is the parsed JSON answer (a problem's
 * detail included) or null; a network failure is a status 0 with a message.
 */
export async function api(path, { method = 'GET', body, headers = {}, signal } = {}) {
  const s = session();
  const h = {
    Authorization: `Bearer ${s ? s.token : ''}`,
    'x-api-key': 'retentiond-console',
    'x-gw-ims-org-id': s ? s.org : '',
    'x-sandbox-name': s ? s.sandbox : 'prod',
    ...headers,
  };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), signal });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    return { status: 0, ok: false, data: { detail: `The service could not be reached (${err.message}).` }, headers: new Headers() };
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { detail: text }; }
  if (resp.status === 401 || (resp.status === 403 && data && data.error_code)) {
    // The gateway refused the token itself (expired, another org): sign in again.
    signOut(data && data.message);
  }
  return { status: resp.status, ok: resp.ok, data, headers: resp.headers };
}

/** The message of a failed answer: the problem's detail, the gateway's message, or the status. */
export function problemText(resp) {
  const d = resp.data || {};
  return d.detail || d.message || d.title || `The service answered ${resp.status}.`;
}

function signIn(token) {
  token = token.trim().replace(/^Bearer\s+/i, '');
  const claims = decodeClaims(token);
  if (!claims || !claims.org) return 'This is not a token of this service: paste the JWT that `retentionctl token` or `make run` prints.';
  store.setItem('token', token);
  return '';
}

function signOut(reason) {
  store.removeItem('token');
  store.setItem('signout-reason', reason || '');
  if (location.hash !== '#/signin') location.hash = '#/signin';
  else route();
}

// A link of `make run` carries the token in the fragment (#token=...), which never reaches a server or a log; it
// is moved to sessionStorage and the fragment replaced at once, so it stays out of the history too.
function takeTokenFromFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const token = params.get('token');
  if (!token) return;
  const err = signIn(token);
  if (params.get('sandbox')) store.setItem('sandbox', params.get('sandbox'));
  history.replaceState(null, '', `${location.pathname}#/${err ? 'signin' : 'datasets'}`);
  if (err) store.setItem('signout-reason', err);
}

function signInView(main) {
  const reason = store.getItem('signout-reason');
  store.removeItem('signout-reason');
  const error = h('p', { className: 'error', id: 'signin-error', role: 'alert' }, reason || '');
  const input = h('textarea', { id: 'token', name: 'token', rows: 4, required: true, spellcheck: false, 'aria-describedby': 'token-hint signin-error' });
  const form = h('form', { className: 'signin', onsubmit: (e) => {
    e.preventDefault();
    const err = signIn(input.value);
    if (err) { error.textContent = err; input.focus(); return; }
    location.hash = '#/datasets';
  } },
  h('h1', {}, 'Sign in'),
  h('label', { htmlFor: 'token' }, 'Bearer token'),
  input,
  h('p', { className: 'hint', id: 'token-hint' }, 'Paste a token (', h('code', {}, './bin/retentionctl token'), '), or open the link `make run` prints. It is kept in this tab only, until you sign out or close it.'),
  error,
  h('button', { type: 'submit', className: 'primary' }, 'Sign in'));
  main.replaceChildren(form);
  input.focus();
}

function showHeader(s) {
  document.getElementById('nav').hidden = !s;
  document.getElementById('session').hidden = !s;
  if (!s) return;
  document.getElementById('sandbox').value = s.sandbox;
  document.getElementById('who').textContent = `${s.user} · ${s.org}`;
}

const views = { datasets: datasetsView };

/** Shows the view the fragment names, or sign-in when there is no session; resolves once the view is shown. */
export async function route() {
  const main = document.getElementById('main');
  const s = session();
  showHeader(s);
  const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
  if (!s) { signInView(main); return; }
  const view = views[path.split('/')[0]];
  if (!view) { location.replace('#/datasets'); return; }
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.getAttribute('href') === `#/${path.split('/')[0]}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  await view(main, new URLSearchParams(query || ''));
}

function start() {
  takeTokenFromFragment();
  document.getElementById('signout').addEventListener('click', () => signOut('You are signed out.'));
  const sandbox = document.getElementById('sandbox');
  document.getElementById('session').addEventListener('submit', (e) => e.preventDefault());
  sandbox.addEventListener('change', () => {
    store.setItem('sandbox', sandbox.value.trim() || 'prod');
    route();
  });
  window.addEventListener('hashchange', route);
  route();
}

start();
