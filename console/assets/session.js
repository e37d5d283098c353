// What every view shares: the session (token, org, sandbox in sessionStorage), the API client, and the way to ask
// for the page to be shown again. It imports no view, so views and the shell (app.js) import it without a cycle.

/** Where the session is kept: this tab only, until sign-out or the tab is closed. */
export const store = window.sessionStorage;

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
    sandbox: sandboxPattern.test(store.getItem('sandbox') || '') ? store.getItem('sandbox') : 'prod',
  };
}

/** Whether the session's token carries scope; the API decides in the end, this only spares a refused request. */
export function can(scope) {
  const s = session();
  return !!s && s.scopes.includes(scope);
}

/** A JWT's payload read without checking it (the API checks the signature on every call), or null. */
export function decodeClaims(token) {
  try {
    const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(payload));
  } catch {
    return null;
  }
}

/**
 * Calls the service's API as the session: {status, ok, data, headers}. data is the parsed JSON answer (a problem's
 * detail included) or null, or with raw the text of a successful answer (an export); a network failure is a status
 * 0 with a message.
 */
export async function api(path, { method = 'GET', body, headers = {}, signal, raw = false } = {}) {
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
  if (raw && resp.ok) return { status: resp.status, ok: true, data: text, headers: resp.headers };
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { detail: text }; }
  if (resp.status === 401 || (resp.status === 403 && data && data.error_code)) {
    // The gateway refused the token itself (expired, another org, not signed by this service): sign in again.
    signOut(`${(data && data.message) || 'The token was refused.'} Get a new one with ./bin/retentionctl token (or the link make run prints) and paste the token alone.`);
  }
  return { status: resp.status, ok: resp.ok, data, headers: resp.headers };
}

/** The message of a failed answer: the problem's detail, the gateway's message, or the status. */
export function problemText(resp) {
  const d = resp.data || {};
  return d.detail || d.message || d.title || `The service answered ${resp.status}.`;
}

/** The sandbox names the API accepts in x-sandbox-name (httpapi's sandboxPattern): lowercase letters, digits and
 * dashes, at most 63, not starting with a dash. */
export const sandboxPattern = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Ends the session and shows the sign-in page with reason. */
export function signOut(reason) {
  store.removeItem('token');
  store.setItem('signout-reason', reason || '');
  if (location.hash !== '#/signin') location.hash = '#/signin';
  else route();
}

// router is the shell's function that shows the fragment's view. The shell imports the views, so they reach it
// through here, set when the shell starts, rather than by importing it.
let router = async () => {};

/** Sets the function route calls; the shell (app.js) sets it once, before anything is shown. */
export function setRouter(fn) {
  router = fn;
}

/** Shows the view the fragment names, or sign-in when there is no session; resolves once the view is shown. */
export function route() {
  return router();
}
