// The console's shell: sign-in, a link's token, the header, and the router that shows a view for the URL's fragment
// (#/datasets, ...). Views live in their own modules; the session and the API client, which they share with the
// shell, in session.js.

import { h } from './format.js';
import { auditView } from './audit.js';
import { datasetsView } from './datasets.js';
import { runsView } from './runs.js';
import { workOrdersView } from './workorders.js';
import { decodeClaims, route, sandboxPattern, session, setRouter, signOut, store } from './session.js';

// tokenPattern is a JWT's shape: three base64url parts. What the API checks is its signature; this only catches a
// paste of something else (a whole `export TOKEN=…` line, quotes, a header) before it is sent.
const tokenPattern = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** The token in what was pasted: a bare JWT, or one behind `export TOKEN=`, `Bearer ` or `Authorization:`, quoted or
 * not, as the banner of `make run` and the README print it; '' when there is none. */
export function tokenIn(text) {
  const t = String(text).trim()
    .replace(/^export\s+[A-Za-z_][A-Za-z0-9_]*=/, '')
    .replace(/^Authorization:\s*/i, '')
    .replace(/^(["'])(.*)\1$/s, '$2')
    .replace(/^Bearer\s+/i, '')
    .trim();
  return tokenPattern.test(t) ? t : '';
}

const pasteHint = 'Paste the token alone (it starts with eyJ), as `./bin/retentionctl token` prints it, or open the link `make run` prints.';

// claimsOf is the token's org and user, or an error message.
function claimsOf(text) {
  const token = tokenIn(text);
  const claims = token ? decodeClaims(token) : null;
  if (!claims || !claims.org) return { error: `This is not a token of this service. ${pasteHint}` };
  return { token, claims };
}

function signIn(text) {
  const { token, error } = claimsOf(text);
  if (error) return error;
  store.setItem('token', token);
  return '';
}

/** Who a token says it is, for a person to read: "user · org". */
function identity(claims) {
  return `${claims.sub || 'no user'} · ${claims.org}`;
}

// A link of `make run` carries the token in the fragment (#token=...), which never reaches a server or a log; it
// is moved to sessionStorage and the fragment replaced at once, so it stays out of the history too. A link never
// replaces a session already open in this tab on its own: anyone can send a link, and a steward who then typed a
// hold's reason would be typing it into the link author's org. Such a link is held until the user chooses
// (linkChoiceView). Its sandbox is checked as the API checks x-sandbox-name.
function takeTokenFromFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const text = params.get('token');
  if (!text) return;
  const sandbox = params.get('sandbox');
  const { token, claims, error } = claimsOf(text);
  const current = session();
  history.replaceState(null, '', `${location.pathname}#/${error && !current ? 'signin' : 'datasets'}`);
  if (error) {
    store.setItem(current ? 'link-refused' : 'signout-reason', `The link was not used: ${error}`);
    return;
  }
  if (sandbox !== null && !sandboxPattern.test(sandbox)) {
    store.setItem(current ? 'link-refused' : 'signout-reason', `The link was not used: its sandbox ${JSON.stringify(sandbox.slice(0, 80))} is not a sandbox name (lowercase letters, digits and dashes, at most 63).`);
    if (!current) history.replaceState(null, '', `${location.pathname}#/signin`);
    return;
  }
  if (current && current.token !== token) {
    pending = { token, claims, sandbox };
    return;
  }
  store.setItem('token', token);
  if (sandbox) store.setItem('sandbox', sandbox);
}

// pending is a link's session waiting for the user to choose between it and the one open in this tab.
let pending = null;

// linkChoiceView asks whether the link's identity replaces the tab's, naming both; nothing changes until a button
// is pressed.
function linkChoiceView(main) {
  const s = session();
  const link = pending;
  const keep = h('button', { type: 'button', className: 'primary', id: 'link-keep', onclick: () => { pending = null; route(); } },
    `Stay signed in as ${s.user} · ${s.org}`);
  const take = h('button', { type: 'button', id: 'link-switch', onclick: () => {
    pending = null;
    store.setItem('token', link.token);
    if (link.sandbox) store.setItem('sandbox', link.sandbox);
    route();
  } }, `Switch to ${identity(link.claims)}`);
  main.replaceChildren(h('section', { className: 'signin', id: 'link-choice', 'aria-labelledby': 'link-choice-title' },
    h('h1', { id: 'link-choice-title' }, 'This link signs in as someone else'),
    h('p', {}, 'You are signed in as ', h('strong', {}, `${s.user} · ${s.org}`), ` (sandbox ${s.sandbox}). The link you opened carries a token of `,
      h('strong', { id: 'link-identity' }, identity(link.claims)), link.sandbox ? ` (sandbox ${link.sandbox})` : '', '.'),
    h('p', { className: 'hint' }, 'Switch only if you asked for this link: whatever you do next, holds and retention changes included, would be done as its identity.'),
    h('p', { className: 'actions-left' }, keep, ' ', take)));
  keep.focus();
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
  h('p', { className: 'hint', id: 'token-hint' }, 'Paste a token (', h('code', {}, './bin/retentionctl token'), ' prints one; a whole ', h('code', {}, 'export TOKEN=…'), ' line works too), or open the link ', h('code', {}, 'make run'), ' prints. It is kept in this tab only, until you sign out or close it.'),
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

const views = { datasets: datasetsView, runs: runsView, workorders: workOrdersView, audit: auditView };

// showFragment shows the view the fragment names, or sign-in when there is no session; it is session.js's route.
async function showFragment() {
  const main = document.getElementById('main');
  // A link opened in a tab already showing the console changes only the fragment: it is taken as at a load.
  if (/(^#|&)token=/.test(location.hash)) takeTokenFromFragment();
  // A dialog belongs to the page it was opened on: Back or a typed URL closes it.
  for (const d of document.querySelectorAll('dialog[open]')) d.close();
  const s = session();
  showHeader(s);
  const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
  if (!s) { signInView(main); return; }
  if (pending) { linkChoiceView(main); return; }
  const view = views[path.split('/')[0]];
  if (!view) { location.replace('#/datasets'); return; }
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.getAttribute('href') === `#/${path.split('/')[0]}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  await view(main, new URLSearchParams(query || ''), path);
  const refused = store.getItem('link-refused');
  if (refused) {
    store.removeItem('link-refused');
    main.prepend(h('p', { className: 'error', id: 'link-refused', role: 'alert' }, refused));
  }
}

function start() {
  setRouter(showFragment);
  takeTokenFromFragment();
  document.getElementById('signout').addEventListener('click', () => signOut('You are signed out.'));
  const sandbox = document.getElementById('sandbox');
  document.getElementById('session').addEventListener('submit', (e) => e.preventDefault());
  sandbox.addEventListener('change', () => {
    const name = sandbox.value.trim() || 'prod';
    // Checked as the API checks x-sandbox-name, so that a name it would refuse is never stored.
    sandbox.setCustomValidity(sandboxPattern.test(name) ? '' : 'A sandbox name is lowercase letters, digits and dashes, at most 63.');
    if (!sandbox.reportValidity()) return;
    store.setItem('sandbox', name);
    route();
  });
  window.addEventListener('hashchange', route);
  route();
}

start();
