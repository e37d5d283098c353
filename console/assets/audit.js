// The audit log: one page of the sandbox's events from GET /audit/events, filtered by action, asset, user and time
// range (the API's property= terms), each event's details with every before/after as a diff; the export of the
// same filters (GET /audit/export) as CSV or JSON, and the chain's verification (GET /audit/verify).

import { api, problemText } from './session.js';
import { count, h, time } from './format.js';

/** Events on a page. */
export const auditPageSize = 25;

const actions = ['Create', 'Update', 'Delete', 'Expire', 'Hold', 'Release', 'Replace', 'Cancel', 'Execute'];

/** Renders the audit log into main for the fragment's query: action, asset, user, from, to, page, event. */
export async function auditView(main, params) {
  const state = {
    action: params.get('action') || '', asset: params.get('asset') || '', user: params.get('user') || '',
    from: params.get('from') || '', to: params.get('to') || '',
    page: Math.max(0, Number(params.get('page')) || 0), event: params.get('event') || '',
  };
  const status = h('p', { className: 'status', id: 'audit-status', role: 'status' }, 'Loading events…');
  const table = h('table', { className: 'inventory', id: 'audit' },
    h('caption', { className: 'visually-hidden' }, 'Audit events, one page, newest first'),
    h('thead', {}, h('tr', {}, ['Time', 'Action', 'Asset', 'User', 'Status', 'Details'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, Array.from({ length: 5 }, () => h('tr', { className: 'placeholder' }, Array.from({ length: 6 }, () => h('td', {}, '\u00a0'))))));
  const pager = h('nav', { className: 'pager', 'aria-label': 'Pages' });
  main.replaceChildren(h('h1', {}, 'Audit log'), auditFilters(state), tools(state), status,
    h('div', { className: 'table-wrap' }, table), pager);
  const query = filterQuery(state);
  query.set('limit', String(auditPageSize));
  query.set('start', String(state.page * auditPageSize));
  const resp = await api(`/audit/events?${query}`);
  if (!resp.ok) {
    status.replaceChildren(h('span', { className: 'error', role: 'alert' }, `The audit log could not be read: ${problemText(resp)}`));
    return;
  }
  const events = resp.data._embedded.events;
  table.tBodies[0].replaceChildren(...events.flatMap((ev) => eventRows(ev, ev.id === state.event)));
  status.textContent = auditStatus(state, events.length, resp.data.page);
  const more = !!(resp.data._links && resp.data._links.next);
  pager.replaceChildren(
    h('button', { type: 'button', id: 'audit-prev', disabled: state.page === 0, onclick: () => goAudit(state, { page: state.page - 1, event: '' }) }, 'Previous page'),
    h('span', {}, `Page ${count(state.page + 1)}`),
    h('button', { type: 'button', id: 'audit-next', disabled: !more, onclick: () => goAudit(state, { page: state.page + 1, event: '' }) }, 'Next page'));
  const opened = table.querySelector('tr.event[aria-current] button');
  if (opened) opened.focus();
}

// filterQuery turns the filters into the API's property terms; an asset of 24 hex digits is an id, else a name.
function filterQuery(state) {
  const q = new URLSearchParams();
  if (state.action) q.append('property', `action==${state.action}`);
  if (state.asset) q.append('property', /^[0-9a-f]{24}$/.test(state.asset) ? `assetId==${state.asset}` : `assetName==${state.asset}`);
  if (state.user) q.append('property', `user==${state.user}`);
  if (state.from) q.append('property', `timestamp>=${state.from}`);
  if (state.to) q.append('property', `timestamp<=${state.to}`);
  return q;
}

function auditStatus(state, n, page) {
  const filtered = state.action || state.asset || state.user || state.from || state.to;
  if (n === 0 && !filtered && state.page === 0) return 'No audit events yet in this sandbox — changing a dataset\'s retention writes the first.';
  if (n === 0) return 'No events match these filters.';
  const first = state.page * auditPageSize + 1;
  const total = page.totalElementsCapped ? `more than ${count(page.totalElements - 1)}` : `${page.totalElementsEstimated ? 'about ' : ''}${count(page.totalElements)}`;
  return `Showing events ${count(first)} to ${count(first + n - 1)} of ${total}.`;
}

/** goAudit moves to the audit log with the state changed; the fragment holds it, so Back and links work. */
export function goAudit(state, change) {
  const next = { ...state, ...change };
  const q = new URLSearchParams();
  for (const k of ['action', 'asset', 'user', 'from', 'to', 'event']) if (next[k]) q.set(k, next[k]);
  if (next.page) q.set('page', String(next.page));
  location.hash = `#/audit${q.size ? `?${q}` : ''}`;
}

// localInput shows an ISO instant in a datetime-local control (the viewer's zone); utc reads it back.
function localInput(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
}

function utc(local) {
  if (!local) return '';
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

function auditFilters(state) {
  const action = h('select', { id: 'audit-action', name: 'action' }, h('option', { value: '' }, 'Any'),
    actions.map((a) => h('option', { value: a, selected: a === state.action }, a)));
  const asset = h('input', { id: 'audit-asset', name: 'asset', type: 'search', value: state.asset, maxLength: 256, autocomplete: 'off', 'aria-describedby': 'audit-asset-hint' });
  const user = h('input', { id: 'audit-user', name: 'user', type: 'search', value: state.user, maxLength: 256, autocomplete: 'off' });
  const from = h('input', { id: 'audit-from', name: 'from', type: 'datetime-local', step: 1, value: localInput(state.from) });
  const to = h('input', { id: 'audit-to', name: 'to', type: 'datetime-local', step: 1, value: localInput(state.to) });
  const field = (el, label, hint) => h('div', {}, h('label', { htmlFor: el.id }, label), el, hint || null);
  return h('form', { className: 'filters', role: 'search', 'aria-label': 'Filter events', onsubmit: (e) => {
    e.preventDefault();
    goAudit(state, { action: action.value, asset: asset.value.trim(), user: user.value.trim(), from: utc(from.value), to: utc(to.value), page: 0, event: '' });
  } },
  field(action, 'Action'),
  field(asset, 'Asset', h('span', { className: 'hint', id: 'audit-asset-hint' }, 'a dataset\'s exact name or id')),
  field(user, 'User'),
  field(from, 'From (your time)'),
  field(to, 'To (your time)'),
  h('button', { type: 'submit' }, 'Filter'));
}

// tools are the export buttons and the chain's verification, with their results.
function tools(state) {
  const result = h('p', { className: 'status', id: 'audit-tools-status', role: 'status' });
  const exportAs = (format) => h('button', { type: 'button', id: `audit-export-${format}`, onclick: () => exportEvents(state, format, result) }, `Export ${format.toUpperCase()}`);
  return h('div', { className: 'tools' },
    h('div', { className: 'row' }, exportAs('csv'), exportAs('json'),
      h('button', { type: 'button', id: 'audit-verify', onclick: () => verify(state, result) }, 'Verify the chain')),
    result);
}

// exportEvents fetches the export of the current filters with the session's token (a plain link could not carry
// it) and hands it to the browser as a download.
async function exportEvents(state, format, result) {
  const q = filterQuery(state);
  q.set('format', format);
  result.textContent = `Exporting ${format.toUpperCase()}…`;
  const resp = await api(`/audit/export?${q}`, { raw: true });
  if (!resp.ok) { result.replaceChildren(h('span', { className: 'error' }, `The export failed: ${problemText(resp)}`)); return; }
  const name = (/filename="([^"]+)"/.exec(resp.headers.get('Content-Disposition') || '') || [])[1] || `audit-events.${format}`;
  const n = format === 'json' ? JSON.parse(resp.data).length : resp.data.split('\n').filter(Boolean).length - 1;
  const url = URL.createObjectURL(new Blob([resp.data], { type: resp.headers.get('Content-Type') || 'text/plain' }));
  const a = h('a', { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  result.textContent = `Exported ${count(n)} ${n === 1 ? 'event' : 'events'} of the last 365 days to ${name}.`;
  result.dataset.exported = String(n);
}

async function verify(state, result) {
  result.textContent = 'Verifying the chain…';
  const resp = await api('/audit/verify');
  if (!resp.ok) { result.replaceChildren(h('span', { className: 'error' }, `The chain could not be verified: ${problemText(resp)}`)); return; }
  const v = resp.data;
  if (v.valid) {
    result.replaceChildren(h('span', { className: 'ok' }, `Verified ${count(v.events)} ${v.events === 1 ? 'event' : 'events'} of sandbox ${v.sandboxName}: the chain is intact up to event #${count(v.head.seq)}.`));
    return;
  }
  const b = v.firstBroken;
  // The link shows the log at the broken event's millisecond (its timestamp is cut to milliseconds, so the next one
  // is included), the event opened.
  const at = b.timestamp ? Date.parse(b.timestamp.replace(/([+-]\d\d)(\d\d)$/, '$1:$2')) : NaN;
  const where = b.id && !Number.isNaN(at)
    ? h('a', { id: 'audit-broken', href: `#/audit?${new URLSearchParams({ from: new Date(at).toISOString(), to: new Date(at + 1).toISOString(), event: b.id })}` }, `event #${b.seq}`)
    : `event #${b.seq}${b.sandboxName ? '' : ' (of another sandbox)'}`;
  result.replaceChildren(h('span', { className: 'error', role: 'alert' }, 'The chain is broken at ', where, `: ${b.reason}. ${b.detail}`));
}

// eventRows are an event's row and its details row, hidden until its button opens it.
function eventRows(ev, open) {
  const detailsID = `event-${ev.id}`;
  const toggle = h('button', { type: 'button', className: 'link', 'aria-expanded': String(open), 'aria-controls': detailsID },
    open ? 'Hide' : 'Show', h('span', { className: 'visually-hidden' }, ` details of ${ev.action} ${ev.assetName || ev.assetId}`));
  const details = h('tr', { className: 'details', id: detailsID, hidden: !open }, h('td', { colSpan: 6 }, detailsView(ev)));
  toggle.addEventListener('click', () => {
    details.hidden = !details.hidden;
    toggle.setAttribute('aria-expanded', String(!details.hidden));
    toggle.firstChild.textContent = details.hidden ? 'Show' : 'Hide';
  });
  const row = h('tr', { className: 'event', 'data-id': ev.id, 'data-action': ev.action, 'aria-current': open ? 'true' : null },
    h('td', {}, time(Date.parse(ev.timestamp))),
    h('td', {}, ev.action),
    h('td', {}, ev.assetName || ev.assetId, h('span', { className: 'muted' }, ` ${ev.assetType}`)),
    h('td', {}, ev.userEmail || ev.clientId || '—'),
    h('td', {}, ev.status),
    h('td', {}, toggle));
  return [row, details];
}

// isChange is a {before, after} pair of the details.
function isChange(v) {
  return v && typeof v === 'object' && !Array.isArray(v) && ('before' in v || 'after' in v) && Object.keys(v).every((k) => k === 'before' || k === 'after');
}

// changes flattens the details into [path, before, after] for every before/after pair, one line per field of an
// object pair (rowExpiration's ttlValue, valueStatus, ...), and [path, value] for the rest.
function changes(details, path = []) {
  const out = [];
  for (const [k, v] of Object.entries(details || {})) {
    const p = [...path, k];
    if (isChange(v)) {
      const objects = [v.before, v.after].every((x) => x == null || (typeof x === 'object' && !Array.isArray(x)));
      if (objects && (v.before || v.after)) {
        const keys = [...new Set([...Object.keys(v.before || {}), ...Object.keys(v.after || {})])].sort();
        for (const f of keys) out.push({ path: [...p, f], change: true, before: (v.before || {})[f], after: (v.after || {})[f], has: [!!v.before && f in v.before, !!v.after && f in v.after] });
      } else {
        out.push({ path: p, change: true, before: v.before, after: v.after, has: ['before' in v, 'after' in v] });
      }
    } else if (v && typeof v === 'object' && !Array.isArray(v)) {
      out.push(...changes(v, p));
    } else {
      out.push({ path: p, change: false, value: v });
    }
  }
  return out;
}

// shown writes a value of the details: epoch milliseconds of a time field as a time, null as such.
function shown(key, v, present = true) {
  if (!present) return h('span', { className: 'muted' }, '(none)');
  if (v === null) return h('code', {}, 'null');
  if (typeof v === 'number' && /updated|lastCompleted|At$/.test(key) && v > 1e11) return time(v);
  return h('code', {}, typeof v === 'object' ? JSON.stringify(v) : String(v));
}

function detailsView(ev) {
  const lines = changes(ev.details);
  const diff = lines.filter((l) => l.change);
  const rest = lines.filter((l) => !l.change);
  const key = (l) => l.path[l.path.length - 1];
  return h('div', { className: 'event-details' },
    diff.length ? h('table', { className: 'diff' },
      h('caption', {}, `What changed (${ev.action})`),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Field'), h('th', { scope: 'col' }, 'Before'), h('th', { scope: 'col' }, 'After'))),
      h('tbody', {}, diff.map((l) => {
        const same = l.has[0] && l.has[1] && JSON.stringify(l.before) === JSON.stringify(l.after);
        return h('tr', { className: same ? 'same' : 'changed', 'data-field': l.path.join('.') },
          h('th', { scope: 'row' }, l.path.join('.'), same ? null : h('span', { className: 'visually-hidden' }, ' (changed)')),
          h('td', { className: 'before' }, shown(key(l), l.before, l.has[0])),
          h('td', { className: 'after' }, shown(key(l), l.after, l.has[1])));
      }))) : null,
    rest.length ? h('dl', { className: 'facts' }, rest.flatMap((l) => [h('dt', {}, l.path.join('.')), h('dd', {}, shown(key(l), l.value))])) : null,
    h('p', { className: 'muted' }, `Event ${ev.id}, request ${ev.requestId || '—'}, chain #${ev.chain.seq}, hash `, h('code', {}, ev.chain.hash.slice(0, 16)), '…'));
}
