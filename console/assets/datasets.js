// The datasets inventory: one page of the org's datasets in the chosen sandbox, sorted, filtered and paged by the
// API (GET /dataSets with orderBy, property=name~, tags=, limit and start), so it stays fast whatever their number.

import { api, problemText, route } from './session.js';
import { bytes, count, h, period, time } from './format.js';
import { datasetView, nextJob, pendingExpiry } from './dataset.js';
import { openRetentionDialog } from './retention.js';

/** Rows on a page. One more is asked for, to know whether a next page exists without counting them all. */
export const pageSize = 25;

// columns of the table; sort is the API's orderBy field for the columns it can sort by.
const columns = [
  { label: 'Name', sort: 'name' },
  { label: 'Type', sort: 'classification.dataBehavior' },
  { label: 'Managed by', sort: 'classification.managedBy' },
  { label: 'Data lake retention', sort: 'extensions.adobe_lakeHouse.rowExpiration.ttlValue' },
  { label: 'Profile retention', sort: 'extensions.adobe_unifiedProfile.rowExpiration.ttlValue' },
  { label: 'Rows', num: true, sort: 'extensions.adobe_lakeHouse.metrics.rowCount' },
  // Sorted by storage, the API measures the estimate in the listing itself and shows the figures it ordered by.
  { label: 'Storage', num: true, sort: 'extensions.adobe_lakeHouse.metrics.storageSize' },
  { label: 'Held' },
  { label: 'Last retention job', sort: 'extensions.adobe_lakeHouse.rowExpiration.lastCompleted' },
  // The store's next run, the same for every dataset but the held ones, which come after it ("After release").
  { label: 'Next retention job', sort: 'extensions.adobe_lakeHouse.rowExpiration.nextRun' },
  { label: 'Actions' },
];

const lake = 'adobe_lakeHouse';
const profile = 'adobe_unifiedProfile';

/** Renders the inventory into main for the fragment's query (sort, q: name contains, tag, held, page), or one
 * dataset for #/datasets/{id}. */
export async function datasetsView(main, params, path) {
  const id = (path || '').split('/')[1];
  if (id) return datasetView(main, decodeURIComponent(id));
  const state = {
    sort: params.get('sort') || 'name',
    q: params.get('q') || '',
    tag: params.get('tag') || '',
    held: params.get('held') === '1',
    page: Math.max(0, Number(params.get('page')) || 0),
  };
  const status = h('p', { className: 'status', id: 'inventory-status', role: 'status' }, 'Loading datasets…');
  const table = inventoryTable(state);
  const pager = h('nav', { className: 'pager', 'aria-label': 'Pages' });
  main.replaceChildren(h('h1', {}, 'Datasets'), filters(state), status, h('div', { className: 'table-wrap' }, table), pager);
  // Ties (datasets of one type, say) fall back to the name, so a page's order is the one a reader expects.
  const orderBy = /(^|:)name$/.test(state.sort) ? state.sort : `${state.sort},name`;
  const query = new URLSearchParams({ limit: String(pageSize + 1), start: String(state.page * pageSize), orderBy });
  if (state.q) query.append('property', `name~${state.q}`);
  if (state.held) query.append('property', 'holds.active>0');
  if (state.tag) query.set('tags', state.tag);
  const started = performance.now();
  const resp = await api(`/dataSets?${query}`);
  if (!resp.ok) {
    status.textContent = '';
    status.append(h('span', { className: 'error', role: 'alert' }, `The datasets could not be listed: ${problemText(resp)}`));
    return;
  }
  const entries = Object.entries(resp.data || {});
  const tbody = table.tBodies[0];
  tbody.replaceChildren(...entries.slice(0, pageSize).map(([id, ds]) => datasetRow(id, ds)));
  // The measures the browser test reports (docs/console.md): this page's request and drawing, and the time since
  // the document's navigation began, which on a first load includes loading the modules.
  main.dataset.loadedMs = String(Math.round(performance.now() - started));
  main.dataset.shownMs = String(Math.round(performance.now()));
  status.textContent = statusText(state, entries.length);
  pager.replaceChildren(...pagerButtons(state, entries.length > pageSize));
}

function statusText(state, n) {
  if (n === 0 && !state.q && !state.tag && !state.held && state.page === 0) {
    return 'No datasets yet in this sandbox — create one with POST /dataSets (README, "The API in five minutes"), or run `make run` for the demo data.';
  }
  if (n === 0) return 'No datasets match these filters.';
  const first = state.page * pageSize + 1;
  return `Showing datasets ${count(first)} to ${count(first + Math.min(n, pageSize) - 1)}.`;
}

// go moves to the inventory with the state changed; the fragment holds the state, so Back returns to it.
function go(state, change) {
  const next = { ...state, ...change };
  const q = new URLSearchParams();
  if (next.sort !== 'name') q.set('sort', next.sort);
  if (next.q) q.set('q', next.q);
  if (next.tag) q.set('tag', next.tag);
  if (next.held) q.set('held', '1');
  if (next.page) q.set('page', String(next.page));
  const hash = `#/datasets${q.size ? `?${q}` : ''}`;
  if (location.hash === hash) route();
  else location.hash = hash;
}

function filters(state) {
  const name = h('input', { id: 'filter-name', name: 'q', type: 'search', value: state.q, maxLength: 256, autocomplete: 'off' });
  const tag = h('input', { id: 'filter-tag', name: 'tag', type: 'search', value: state.tag, maxLength: 600, placeholder: 'team:web', autocomplete: 'off', 'aria-describedby': 'filter-tag-hint' });
  const held = h('input', { id: 'filter-held', name: 'held', type: 'checkbox', checked: state.held });
  return h('form', { className: 'filters', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    go(state, { q: name.value.trim(), tag: tag.value.trim(), held: held.checked, page: 0 });
  } },
  h('div', {}, h('label', { htmlFor: 'filter-name' }, 'Name contains'), name),
  h('div', {}, h('label', { htmlFor: 'filter-tag' }, 'Tag'), tag,
    h('span', { className: 'hint', id: 'filter-tag-hint' }, 'name:value, * as a wildcard')),
  h('div', { className: 'check' }, held, h('label', { htmlFor: 'filter-held' }, 'Held only')),
  h('button', { type: 'submit' }, 'Filter'));
}

function inventoryTable(state) {
  const [field, desc] = state.sort.startsWith('desc:') ? [state.sort.slice(5), true] : [state.sort.replace(/^asc:/, ''), false];
  const head = columns.map((c) => {
    if (!c.sort) return h('th', { scope: 'col', className: c.num ? 'num' : '' }, c.label);
    const active = c.sort === field;
    const next = active && !desc ? `desc:${c.sort}` : c.sort;
    return h('th', { scope: 'col', className: c.num ? 'num' : '', 'aria-sort': active ? (desc ? 'descending' : 'ascending') : 'none' },
      h('button', { type: 'button', className: 'sort', onclick: () => go(state, { sort: next, page: 0 }) },
        c.label, h('span', { 'aria-hidden': 'true', className: 'arrow' }, active ? (desc ? ' ▼' : ' ▲') : ' ↕')));
  });
  // Placeholder rows keep the table's height while the page loads, so nothing jumps when it arrives.
  const placeholders = Array.from({ length: 5 }, () => h('tr', { className: 'placeholder' },
    columns.map(() => h('td', {}, '\u00a0'))));
  return h('table', { className: 'inventory', id: 'inventory' },
    h('caption', { className: 'visually-hidden' }, 'Datasets, one page'),
    h('thead', {}, h('tr', {}, head)),
    h('tbody', {}, placeholders));
}

function rowExpiration(ds, store) {
  const ext = (ds.extensions || {})[store] || {};
  return ext.rowExpiration;
}

function datasetRow(id, ds) {
  const lakeRE = rowExpiration(ds, lake);
  const profileRE = rowExpiration(ds, profile);
  const metrics = ((ds.extensions || {})[lake] || {}).metrics || {};
  // Time-series and record datasets expire rows (records from their last write); the others have no rowExpiration.
  const expires = !!lakeRE;
  const open = h('button', { type: 'button', className: 'link', onclick: (e) => openRetentionDialog(id, ds.name, e.currentTarget) },
    'Set data retention', h('span', { className: 'visually-hidden' }, ` for ${ds.name}`));
  const expiry = pendingExpiry(ds);
  const active = (ds.holds || {}).active || 0;
  return h('tr', { 'data-id': id },
    h('th', { scope: 'row', className: 'name' }, h('a', { className: 'ds-name', href: `#/datasets/${encodeURIComponent(id)}` }, ds.name),
      expiry ? h('span', { className: 'expiry' }, ' · to be deleted on ', time(expiry)) : null),
    h('td', {}, ds.classification ? ds.classification.dataBehavior : '—'),
    h('td', {}, ds.classification ? ds.classification.managedBy : '—'),
    h('td', { className: 'ttl-lake' }, expires ? period(lakeRE.ttlValue) : 'n/a'),
    h('td', { className: 'ttl-profile' }, profileRE ? period(profileRE.ttlValue) : 'n/a'),
    h('td', { className: 'num rows' }, count(metrics.rowCount)),
    h('td', { className: 'num storage', title: metrics.storageSize == null ? '' : `${count(metrics.storageSize)} bytes` }, bytes(metrics.storageSize)),
    h('td', { className: 'held' }, active ? `Held (${count(active)})` : '—'),
    h('td', {}, time(lakeRE && lakeRE.lastCompleted)),
    h('td', { className: 'next-job' }, nextJob(ds)),
    h('td', {}, expires ? open : h('span', { className: 'muted' }, 'no row expiration')));
}

function pagerButtons(state, more) {
  return [
    h('button', { type: 'button', id: 'page-prev', disabled: state.page === 0, onclick: () => go(state, { page: state.page - 1 }) }, 'Previous page'),
    h('span', { id: 'page-number' }, `Page ${count(state.page + 1)}`),
    h('button', { type: 'button', id: 'page-next', disabled: !more, onclick: () => go(state, { page: state.page + 1 }) }, 'Next page'),
  ];
}
