// Record deletes: Adobe's record-delete work orders (GET/POST /data/core/hygiene/workorder, GET /workorder/{id},
// the identity quotas of GET /quota). A form creates an order from typed identities or an uploaded JSON list in
// Adobe's upload format, after a confirmation counting the rows it would delete per dataset (POST
// /workorder/preview); the list pages the orders; an
// order's page shows its parts per dataset and store, polled while the order is open.

import { api, can, problemText } from './session.js';
import { count, h, time } from './format.js';

/** The scope that creates orders (catalog.ScopeWorkOrdersManage); reading them takes datasets.read. */
export const createScope = 'workorders.manage';
/** Orders on a page of the list. */
export const ordersPageSize = 20;
/** The identities of one order, as the API bounds them (catalog.MaxWorkOrderIdentities). */
export const maxIdentities = 100000;
/** The largest upload read: the API's largest POST /workorder body (httpapi.MaxWorkOrderBody, 16 MiB). */
export const maxUploadBytes = 16 << 20;
// The datasets the form offers by name; an ALL order covers every one.
const previewDatasets = 100;
const base = '/data/core/hygiene';
const openStatuses = ['received', 'validated', 'submitted', 'ingested'];
const pollMs = 2000;
// The API's checks of an identity (catalog.CheckIdentity), so that a refusal names the line before anything is sent.
const namespacePattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const maxValueBytes = 1024;

/** Renders #/workorders (the form and the list, ?page=) or #/workorders/{id} (one order). */
export async function workOrdersView(main, params, path) {
  const id = (path || '').split('/')[1];
  if (id) return orderView(main, decodeURIComponent(id));
  const page = Math.max(0, Number(params.get('page')) || 0);
  const status = h('p', { className: 'status', id: 'workorders-status', role: 'status' }, 'Loading record deletes…');
  const table = h('table', { className: 'inventory', id: 'workorders' },
    h('caption', { className: 'visually-hidden' }, 'Record deletes, newest first'),
    h('thead', {}, h('tr', {}, ['Order', 'Name', 'Datasets', 'Identities', 'Status', 'Rows deleted', 'Created', 'Created by']
      .map((c) => h('th', { scope: 'col', className: c === 'Identities' || c === 'Rows deleted' ? 'num' : '' }, c)))),
    h('tbody'));
  const pager = h('nav', { className: 'pager', 'aria-label': 'Pages of record deletes' });
  const quota = h('p', { className: 'hint', id: 'workorders-quota' });
  const intro = h('p', { className: 'hint' }, 'Deletes every row carrying one of the identities named (an identityMap entry, or the dataset\'s primary identity), in both stores, as Adobe\'s Data Hygiene work orders do.');
  const top = can(createScope) ? createForm() : h('p', { className: 'notice', id: 'workorders-read-only' },
    `Read only: your token lacks the ${createScope} scope, so you can see record deletes but not create one.`);
  main.replaceChildren(h('h1', {}, 'Record deletes'), intro, quota, top, h('h2', {}, 'Orders'), status,
    h('div', { className: 'table-wrap' }, table), pager);
  await Promise.all([showQuota(quota), showOrders(table, status, pager, page)]);
}

async function showQuota(el) {
  const resp = await api(`${base}/quota`);
  if (!resp.ok) { el.textContent = ''; return; }
  const q = Object.fromEntries((resp.data.quotas || []).map((x) => [x.name, x]));
  const day = q.dailyConsumerDeleteIdentitiesQuota;
  const month = q.monthlyConsumerDeleteIdentitiesQuota;
  if (!day || !month) return;
  el.textContent = `Identities named by this org's orders: ${count(day.consumed)} of ${count(day.quota)} today (UTC), ${count(month.consumed)} of ${count(month.quota)} this month.`;
}

async function showOrders(table, status, pager, page) {
  const q = new URLSearchParams({ limit: String(ordersPageSize), page: String(page), orderBy: '-createdAt' });
  const resp = await api(`${base}/workorder?${q}`);
  if (!resp.ok) { status.replaceChildren(h('span', { className: 'error', role: 'alert' }, `The record deletes could not be listed: ${problemText(resp)}`)); return; }
  const list = resp.data.results || [];
  table.tBodies[0].replaceChildren(...list.map(orderRow));
  const first = page * ordersPageSize + 1;
  status.textContent = list.length ? `Showing record deletes ${count(first)} to ${count(first + list.length - 1)} of ${count(resp.data.total)}.`
    : page ? 'No more record deletes.' : 'No record deletes yet in this sandbox.';
  const go = (p) => { location.hash = `#/workorders${p ? `?page=${p}` : ''}`; };
  pager.replaceChildren(
    h('button', { type: 'button', disabled: page === 0, onclick: () => go(page - 1) }, 'Previous page'),
    h('span', {}, `Page ${count(page + 1)}`),
    h('button', { type: 'button', disabled: !(resp.data._links || {}).next, onclick: () => go(page + 1) }, 'Next page'));
}

function orderRow(w) {
  return h('tr', { 'data-id': w.workorderId, 'data-status': w.status },
    h('th', { scope: 'row' }, h('a', { href: `#/workorders/${encodeURIComponent(w.workorderId)}` }, w.workorderId)),
    h('td', { className: 'wo-name' }, w.displayName),
    h('td', {}, datasetLabel(w)),
    h('td', { className: 'num' }, count(w.operationCount)),
    h('td', { className: 'wo-status' }, badge(w.status)),
    h('td', { className: 'num wo-rows' }, count(w.rowsDeleted)),
    h('td', {}, time(Date.parse(w.createdAt))),
    h('td', {}, w.createdBy));
}

function datasetLabel(w) {
  if (w.datasetId === 'ALL') return 'All datasets';
  return h('a', { className: 'ds-link', href: `#/datasets/${encodeURIComponent(w.datasetId)}` }, w.datasetName || w.datasetId);
}

function badge(status) {
  const cls = { completed: 'succeeded', failed: 'failed', ingested: 'held', waiting: 'pending', skipped: '' }[status] ?? 'running';
  return h('span', { className: `badge ${cls}` }, status);
}

/** The identity key the API matches by (catalog.IdentityKey): the namespace lowercased, and the value as sent but
 * lowercased in the email namespace. Two entries of one key are one identity. */
export function identityKey(namespace, value) {
  const ns = namespace.toLowerCase();
  return `${ns}:${ns === 'email' ? value.toLowerCase() : value}`;
}

// checkIdentity is the API's refusal of an identity, in words naming where it was read, or ''.
function checkIdentity(where, namespace, value) {
  if (typeof namespace !== 'string' || !namespacePattern.test(namespace)) {
    return `${where}: the namespace code must be 1 to 64 letters, digits, _, . or - (starting with a letter or digit), as email or ECID.`;
  }
  if (typeof value !== 'string' || value === '' || value.includes('\0') || new TextEncoder().encode(value).length > maxValueBytes) {
    return `${where}: the value must be 1 to ${count(maxValueBytes)} bytes of text.`;
  }
  return '';
}

/** Reads typed identities, one a line as namespace:value (a namespace code holds no colon, so the first colon
 * splits them; blank lines are skipped): {identities, error}. */
export function parseTyped(text) {
  const identities = [];
  const lines = String(text).split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line) continue;
    const at = line.indexOf(':');
    if (at < 0) return { identities, error: `Line ${i + 1}: write the namespace, a colon and the value, as email:alice@example.com.` };
    const namespace = line.slice(0, at).trim();
    const value = line.slice(at + 1).trim();
    const error = checkIdentity(`Line ${i + 1}`, namespace, value);
    if (error) return { identities, error };
    identities.push({ namespace, value });
  }
  return { identities, error: '' };
}

/** Reads an upload in Adobe's format, a JSON array of {"namespaceCode": …, "value": …}: {identities, error}. */
export function parseUpload(text, name) {
  let list;
  try { list = JSON.parse(text); } catch (err) { return { identities: [], error: `${name} is not JSON (${err.message}).` }; }
  if (!Array.isArray(list)) return { identities: [], error: `${name} must hold a JSON array of {"namespaceCode": …, "value": …} objects.` };
  if (list.length > maxIdentities) return { identities: [], error: `${name} holds ${count(list.length)} entries; an order names at most ${count(maxIdentities)} identities.` };
  const identities = [];
  for (let i = 0; i < list.length; i++) {
    const e = list[i];
    if (!e || typeof e !== 'object' || Array.isArray(e)) return { identities: [], error: `${name}, entry ${i + 1}: must be an object {"namespaceCode": …, "value": …}.` };
    const error = checkIdentity(`${name}, entry ${i + 1}`, e.namespaceCode, e.value);
    if (error) return { identities: [], error };
    identities.push({ namespace: e.namespaceCode, value: e.value });
  }
  return { identities, error: '' };
}

/** The distinct identities of lists, first spelling kept, as the API deduplicates them. */
export function distinct(...lists) {
  const seen = new Map();
  for (const id of lists.flat()) {
    const k = identityKey(id.namespace, id.value);
    if (!seen.has(k)) seen.set(k, id);
  }
  return [...seen.values()];
}

// namespacesIdentities groups identities by namespace code in the request's shape.
function namespacesIdentities(identities) {
  const by = new Map();
  for (const { namespace, value } of identities) {
    if (!by.has(namespace)) by.set(namespace, []);
    by.get(namespace).push(value);
  }
  return [...by].map(([code, IDs]) => ({ namespace: { code }, IDs }));
}

// createForm: name, description, one dataset or all, identities typed and/or uploaded; Review opens the
// confirmation, which alone sends the order.
function createForm() {
  let uploaded = [];
  const name = h('input', { id: 'wo-name', name: 'displayName', required: true, maxLength: 256, autocomplete: 'off' });
  const description = h('input', { id: 'wo-description', name: 'description', maxLength: 1024, autocomplete: 'off' });
  const dataset = h('select', { id: 'wo-dataset', name: 'datasetId' }, h('option', { value: 'ALL' }, 'All datasets of this sandbox'));
  const typed = h('textarea', { id: 'wo-identities', name: 'identities', rows: 5, spellcheck: false, 'aria-describedby': 'wo-identities-hint wo-count' });
  const file = h('input', { id: 'wo-file', type: 'file', accept: '.json,application/json', 'aria-describedby': 'wo-file-hint wo-count' });
  const summary = h('p', { className: 'hint', id: 'wo-count', role: 'status' }, 'No identities yet.');
  const error = h('p', { className: 'error', id: 'wo-error', role: 'alert' });
  const dialog = h('dialog', { className: 'retention', id: 'wo-confirm', 'aria-labelledby': 'wo-confirm-title' });
  const collect = () => {
    const t = parseTyped(typed.value);
    if (t.error) return { error: t.error };
    const all = distinct(t.identities, uploaded);
    if (all.length > maxIdentities) return { error: `${count(all.length)} identities: an order names at most ${count(maxIdentities)}.` };
    return { identities: all, typed: t.identities.length };
  };
  const refresh = () => {
    const c = collect();
    error.textContent = c.error || '';
    if (c.error) { summary.textContent = ''; return; }
    summary.textContent = c.identities.length ? `${count(c.identities.length)} distinct ${c.identities.length === 1 ? 'identity' : 'identities'} (${count(c.typed)} typed, ${count(uploaded.length)} from the file).` : 'No identities yet.';
  };
  typed.addEventListener('input', refresh);
  file.addEventListener('change', async () => {
    uploaded = [];
    const f = file.files[0];
    if (f && f.size > maxUploadBytes) {
      file.value = '';
      refresh();
      error.textContent = `${f.name} is ${count(f.size)} bytes; an upload is at most ${count(maxUploadBytes)} bytes (16 MiB).`;
      return;
    }
    if (f) {
      const r = parseUpload(await f.text(), f.name);
      if (r.error) { file.value = ''; refresh(); error.textContent = r.error; return; }
      uploaded = r.identities;
    }
    refresh();
  });
  const form = h('form', { className: 'start-run', id: 'create-workorder', 'aria-labelledby': 'wo-create-title', onsubmit: async (e) => {
    e.preventDefault();
    const c = collect();
    if (c.error) { error.textContent = c.error; return; }
    if (!c.identities.length) { error.textContent = 'Name at least one identity: type it, or upload a JSON list.'; typed.focus(); return; }
    error.textContent = '';
    const order = { action: 'delete_identity', datasetId: dataset.value, displayName: name.value.trim(), namespacesIdentities: namespacesIdentities(c.identities) };
    if (description.value.trim()) order.description = description.value.trim();
    await confirm(dialog, order, c.identities.length, dataset.selectedOptions[0].textContent);
  } },
  h('h2', { id: 'wo-create-title' }, 'Delete a person\'s rows'),
  h('div', { className: 'filters' },
    h('div', {}, h('label', { htmlFor: name.id }, 'Name'), name),
    h('div', {}, h('label', { htmlFor: description.id }, 'Description (optional)'), description),
    h('div', {}, h('label', { htmlFor: dataset.id }, 'Datasets'), dataset)),
  h('div', { className: 'identities' },
    h('div', {}, h('label', { htmlFor: typed.id }, 'Identities, one a line'), typed,
      h('p', { className: 'hint', id: 'wo-identities-hint' }, 'The namespace code, a colon and the value: ', h('code', {}, 'email:alice@example.com'), ', ', h('code', {}, 'ECID:0123456789'), '. E-mail addresses compare without case; other values exactly.')),
    h('div', {}, h('label', { htmlFor: file.id }, 'Or upload a JSON list'), file,
      h('p', { className: 'hint', id: 'wo-file-hint' }, 'Adobe\'s upload format: ', h('code', {}, '[{"namespaceCode": "email", "value": "alice@example.com"}]'), `, at most ${count(maxIdentities)} identities and 16 MiB.`))),
  summary, error,
  h('button', { type: 'submit', className: 'primary', id: 'wo-review' }, 'Review the deletion…'),
  dialog);
  datasetOptions(dataset);
  return form;
}

// datasetOptions adds the sandbox's datasets (the first previewDatasets by name) to the select.
async function datasetOptions(select) {
  const resp = await api(`/dataSets?${new URLSearchParams({ limit: String(previewDatasets), orderBy: 'name', properties: 'name' })}`);
  if (!resp.ok) return;
  for (const [id, ds] of Object.entries(resp.data || {})) select.append(h('option', { value: id }, ds.name));
}

// previewRows asks the API what the order would delete now (POST /workorder/preview): per dataset holding rows
// of its identities, the rows of both stores, and the hold that would keep them; nothing is created.
async function previewRows(order) {
  const resp = await api(`${base}/workorder/preview`, { method: 'POST', body: order });
  if (!resp.ok) return { error: problemText(resp) };
  return resp.data;
}

// confirm opens the dialog naming what will be deleted; its Delete button sends the order and opens its page.
async function confirm(dialog, order, n, datasetText) {
  const opener = document.activeElement;
  const p = await previewRows(order);
  const error = h('p', { className: 'error', id: 'wo-confirm-error', role: 'alert' });
  const send = h('button', { type: 'button', className: 'primary', id: 'wo-send', onclick: async () => {
    send.disabled = true;
    const resp = await api(`${base}/workorder`, { method: 'POST', body: order });
    if (!resp.ok) { error.textContent = problemText(resp); send.disabled = false; return; }
    dialog.close();
    location.hash = `#/workorders/${encodeURIComponent(resp.data.workorderId)}`;
  } }, `Delete the rows of ${count(n)} ${n === 1 ? 'identity' : 'identities'}`);
  const cancel = h('button', { type: 'button', id: 'wo-cancel', onclick: () => dialog.close() }, 'Cancel');
  const scope = order.datasetId === 'ALL'
    ? 'every dataset of this sandbox, those created before the order runs included'
    : `the dataset ${datasetText}`;
  dialog.replaceChildren(
    h('h2', { id: 'wo-confirm-title' }, `Delete “${order.displayName}”?`),
    h('p', { id: 'wo-confirm-summary' }, `Every row carrying one of ${count(n)} ${n === 1 ? 'identity' : 'identities'} (${summaryOf(order)}) will be deleted from ${scope}, in the data lake and the profile store. This cannot be undone; a held dataset keeps its rows until its holds are released.`),
    p.error ? h('p', { className: 'error', id: 'wo-preview-error' }, `The rows could not be counted: ${p.error}`) : previewTable(p),
    error,
    h('div', { className: 'actions' }, cancel, send));
  dialog.addEventListener('close', () => { if (opener && opener.isConnected) opener.focus(); }, { once: true });
  dialog.showModal();
  cancel.focus();
}

// previewTable is the confirmation's count: the rows the order would delete now, in all and per dataset.
function previewTable(p) {
  const datasets = p.datasetCount === 1 ? 'the 1 dataset' : `${count(p.datasetCount)} datasets`;
  return h('div', {},
    h('p', { id: 'wo-preview-total' }, `${count(p.rowCount)} ${p.rowCount === 1 ? 'row carries' : 'rows carry'} these identities now in ${datasets} the order covers. Rows stored after this count are deleted too, if the order has not yet run.`),
    p.datasets.length === 0 ? [] : h('div', { className: 'table-wrap' }, h('table', { className: 'inventory', id: 'wo-preview' },
      h('caption', {}, 'Rows the order would delete now, per dataset (data lake and profile store)'),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Dataset'), h('th', { scope: 'col', className: 'num' }, 'Rows to delete'), h('th', { scope: 'col' }, 'Held'))),
      h('tbody', {}, p.datasets.map((d) => h('tr', { 'data-id': d.datasetId },
        h('th', { scope: 'row' }, d.datasetName), h('td', { className: 'num' }, count(d.rowCount)),
        h('td', { className: 'held' }, d.heldBy ? d.heldBy : '—')))))));
}

// summaryOf names the identities by namespace: "2 email, 1 ECID".
function summaryOf(order) {
  return order.namespacesIdentities.map((g) => `${count(g.IDs.length)} ${g.namespace.code}`).join(', ');
}

// orderView shows one order, asked again every pollMs while it is open and its page still shown.
async function orderView(main, id) {
  const hash = location.hash;
  main.replaceChildren(h('p', { className: 'loading' }, 'Loading the record delete…'));
  let last = '';
  let first = true;
  for (;;) {
    const resp = await api(`${base}/workorder/${encodeURIComponent(id)}`);
    if (location.hash !== hash) return;
    if (!resp.ok) {
      main.replaceChildren(h('h1', {}, 'Record delete'), h('p', { className: 'error', role: 'alert' }, `This record delete could not be read: ${problemText(resp)}`),
        h('p', {}, h('a', { href: '#/workorders' }, 'All record deletes')));
      return;
    }
    const seen = JSON.stringify(resp.data);
    if (seen !== last) drawOrder(main, resp.data);
    last = seen;
    if (first) { main.focus(); first = false; }
    if (!openStatuses.includes(resp.data.status)) return;
    await new Promise((resolve) => { setTimeout(resolve, pollMs); });
    if (location.hash !== hash) return;
  }
}

function drawOrder(main, w) {
  const fact = (label, value) => [h('dt', {}, label), h('dd', {}, value)];
  const open = openStatuses.includes(w.status);
  const parts = w.parts || [];
  main.replaceChildren(
    h('p', {}, h('a', { href: '#/workorders' }, '← All record deletes')),
    h('h1', {}, `${w.displayName} `, h('span', { className: 'tag' }, w.workorderId)),
    h('p', { id: 'wo-status', role: 'status' }, badge(w.status), ' ', statusText(w), open ? ' (updated every 2 seconds)' : ''),
    h('dl', { className: 'facts', id: 'wo-facts' },
      fact('Datasets', datasetLabel(w)), fact('Identities', count(w.identityCount)),
      fact('Rows deleted', count(w.rowsDeleted)), fact('Created', time(Date.parse(w.createdAt))), fact('Created by', w.createdBy),
      fact('Completed', w.completedAt ? time(Date.parse(w.completedAt)) : '—'),
      w.description ? fact('Description', w.description) : null,
      w.reason ? fact('Reason', h('span', { id: 'wo-reason' }, w.reason)) : null),
    h('h2', {}, 'Stores'),
    h('ul', { className: 'schedule', id: 'wo-products' }, (w.productStatusDetails || []).map((p) => h('li', {}, h('strong', {}, p.productName), `: ${p.productStatus}`))),
    h('h2', {}, 'Datasets'),
    parts.length ? h('div', { className: 'table-wrap' }, h('table', { className: 'inventory', id: 'wo-parts' },
      h('caption', { className: 'visually-hidden' }, 'Each dataset\'s part of the order'),
      h('thead', {}, h('tr', {}, ['Dataset', 'Status', 'Data lake rows', 'Profile rows', 'Rows deleted', 'Completed', 'Reason']
        .map((c, i) => h('th', { scope: 'col', className: i >= 2 && i <= 4 ? 'num' : '' }, c)))),
      h('tbody', {}, parts.map((p) => h('tr', { 'data-id': p.datasetId, 'data-status': p.status },
        h('th', { scope: 'row' }, h('a', { className: 'ds-link', href: `#/datasets/${encodeURIComponent(p.datasetId)}` }, p.datasetName || p.datasetId)),
        h('td', {}, badge(p.status)),
        h('td', { className: 'num' }, count((p.stores || {}).adobe_lakeHouse ?? 0)),
        h('td', { className: 'num' }, count((p.stores || {}).adobe_unifiedProfile ?? 0)),
        h('td', { className: 'num' }, count(p.rowsDeleted)),
        h('td', {}, p.completedAt ? time(Date.parse(p.completedAt)) : '—'),
        h('td', { className: 'wo-part-reason' }, p.reason || '')))))) : h('p', { className: 'muted', id: 'wo-no-parts' },
      open ? 'The order has not been split into datasets yet: it is once validated.' : 'This order had no dataset to process.'));
}

// statusText says where the order stands, in words.
function statusText(w) {
  return {
    received: 'Received: waiting to be validated.',
    validated: 'Validated: its datasets are known, removal about to start.',
    submitted: 'Submitted: rows are being removed.',
    ingested: 'Ingested: every dataset is done but the held ones, which keep their rows until their holds are released.',
    completed: `Completed: ${count(w.rowsDeleted)} ${w.rowsDeleted === 1 ? 'row' : 'rows'} deleted.`,
    failed: 'Failed.',
  }[w.status] || w.status;
}
