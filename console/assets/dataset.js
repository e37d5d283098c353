// One dataset (#/datasets/{id}): its classification, retention and metrics, its pending dataset expiration (the
// adobe/hygiene/ttl tag of GET /dataSets/{id}), its legal holds (GET /dataSets/{id}/holds), which callers with
// the retention.hold scope place and release here; others see them read only, since the API would refuse them; and
// a form that explains one row's expiry by its _id (GET /dataSets/{id}/rows/{_id}/expiry).

import { api, can, problemText } from './session.js';
import { bytes, count, h, period, time } from './format.js';
import { openRetentionDialog } from './retention.js';

/** The tag under which GET /dataSets/{id} shows a pending dataset expiration, in epoch milliseconds. */
export const expirationTag = 'adobe/hygiene/ttl';

/** The pending expiration of a dataset document in epoch milliseconds, or null. */
export function pendingExpiry(ds) {
  const v = ((ds.tags || {})[expirationTag] || [])[0];
  return v == null || Number.isNaN(Number(v)) ? null : Number(v);
}

/** The next retention job of a dataset document as the API has it (nextRun, catalog.Dataset.NextRun): the store's
 * next run; "After release" while the dataset is held, since no run removes a held dataset's rows before every hold
 * is released; "None" for a dataset kept forever, whose rows no run expires (one only removes rows that expired
 * under an earlier, finite setting, and those are already hidden); a dash without a rowExpiration. */
export function nextJob(ds) {
  const re = (((ds.extensions || {}).adobe_lakeHouse) || {}).rowExpiration;
  if (re && re.ttlValue === null && !((ds.holds || {}).active > 0)) return h('span', { className: 'keep-forever', title: 'Kept forever: no retention job expires its rows' }, 'None (kept forever)');
  if (re && re.nextRun != null) return time(re.nextRun);
  if (re && ((ds.holds || {}).active || 0) > 0) return h('span', { title: 'No retention job removes its rows while it is held' }, 'After release');
  return time(null);
}

/** Renders one dataset into main. */
export async function datasetView(main, id) {
  const hash = location.hash;
  main.replaceChildren(h('p', { className: 'loading' }, 'Loading the dataset…'));
  const [dsResp, holdsResp] = await Promise.all([api(`/dataSets/${encodeURIComponent(id)}`), api(`/dataSets/${encodeURIComponent(id)}/holds`)]);
  if (location.hash !== hash) return;
  const back = h('p', {}, h('a', { href: '#/datasets' }, '← All datasets'));
  if (!dsResp.ok) {
    main.replaceChildren(back, h('h1', {}, 'Dataset'), h('p', { className: 'error', role: 'alert' }, `This dataset could not be read: ${problemText(dsResp)}`));
    return;
  }
  const ds = dsResp.data[id];
  const ext = ds.extensions || {};
  const re = (store) => ((ext[store] || {}).rowExpiration);
  const metrics = (ext.adobe_lakeHouse || {}).metrics || {};
  const fact = (label, ...value) => [h('dt', {}, label), h('dd', {}, ...value)];
  const expiry = pendingExpiry(ds);
  // Time-series and record datasets both expire rows (records from their last write); others have no rowExpiration.
  const expires = !!re('adobe_lakeHouse');
  main.replaceChildren(...[back, h('h1', {}, ds.name),
    expiry ? h('p', { className: 'notice', id: 'pending-expiration' }, 'This dataset is scheduled to be deleted, whole, on ', time(expiry), '.') : null,
    h('dl', { className: 'facts', id: 'dataset-facts' },
      fact('Id', h('code', {}, id)),
      fact('Type', ds.classification ? ds.classification.dataBehavior : '—'),
      fact('Managed by', ds.classification ? ds.classification.managedBy : '—'),
      fact('Tags', Object.entries(ds.tags || {}).filter(([k]) => k !== expirationTag).map(([k, v]) => `${k}:${v.join(',')}`).join('  ') || '—'),
      fact('Data lake retention', expires ? period(re('adobe_lakeHouse').ttlValue) : 'n/a'),
      fact('Profile retention', re('adobe_unifiedProfile') ? period(re('adobe_unifiedProfile').ttlValue) : 'n/a'),
      fact('Rows', count(metrics.rowCount)), fact('Storage', bytes(metrics.storageSize)),
      fact('Last retention job', time(re('adobe_lakeHouse') && re('adobe_lakeHouse').lastCompleted)),
      fact('Next retention job', nextJob(ds)),
      ...backlogFact(ext, 'adobe_lakeHouse', 'Expired, not yet deleted (data lake)', 'backlog-lake'),
      ...backlogFact(ext, 'adobe_unifiedProfile', 'Expired, not yet deleted (profile)', 'backlog-profile')),
    expires ? h('p', {}, h('button', { type: 'button', id: 'open-retention', onclick: (e) => openRetentionDialog(id, ds.name, e.currentTarget) }, 'Set data retention')) : null,
    expirationSection(id, ds, expiry),
    holdsSection(id, holdsResp),
    expires ? explainSection(id) : null].filter(Boolean));
}

// backlogFact shows a store's expired backlog as GET /dataSets/{id} has it (metrics.expiredRowCount and
// oldestExpiredAt): rows expired but still stored, counted from the counters by month of expiry, so a lower bound
// (README, "How far behind deletion is"); nothing for a store the dataset has no metrics of.
function backlogFact(ext, store, label, id) {
  const m = (ext[store] || {}).metrics;
  if (!m || m.expiredRowCount == null) return [];
  const value = m.expiredRowCount === 0 ? ['None counted']
    : [count(m.expiredRowCount), ' rows, expired by ', time(m.oldestExpiredAt)];
  return [h('dt', {}, label), h('dd', { id, 'data-rows': String(m.expiredRowCount),
    title: 'Rows counted from the end of the month they expired in, or from their arrival if they arrived expired: rows that expired this month are not counted yet.' }, ...value)];
}

// isoDay is a day as <input type=date> and the API's expiry take it (midnight UTC): YYYY-MM-DD.
function isoDay(ms) {
  return new Date(ms).toISOString().slice(0, 10);
}

// expirationSection shows the dataset's pending expiration (a deletion of the whole dataset on a day) and, for a
// token with datasets.manage, schedules, moves and cancels it through the Data Hygiene routes, the same ones as
// `retentionctl expirations` (POST /data/core/hygiene/ttl, PUT and DELETE /data/core/hygiene/ttl/{dataset id}).
function expirationSection(id, ds, expiry) {
  const section = h('section', { 'aria-labelledby': 'expiration-title', id: 'expiration' }, h('h2', { id: 'expiration-title' }, 'Dataset expiration'));
  section.append(h('p', { id: 'expiration-status', role: 'status', tabIndex: -1 }, expiry
    ? ['To be deleted, with all its rows, on ', time(expiry), '. Until then it can be moved or cancelled.']
    : 'No deletion scheduled: the dataset stays until it is deleted or an expiration is scheduled.'));
  if (!can('datasets.manage')) {
    section.append(h('p', { className: 'notice', id: 'expiration-read-only' }, 'Scheduling, moving and cancelling a deletion takes the datasets.manage scope, which your token lacks.'));
    return section;
  }
  // The API wants the expiry at least 24 hours ahead: the earliest day offered is the day after tomorrow (UTC).
  const earliest = isoDay(Date.now() + 2 * 86400000);
  const day = h('input', { id: 'expiration-day', name: 'expiry', type: 'date', required: true, min: earliest, value: expiry ? isoDay(expiry) : '', 'aria-describedby': 'expiration-hint expiration-error' });
  const name = expiry ? null : h('input', { id: 'expiration-name', name: 'displayName', maxLength: 200, required: true, value: `Retire ${ds.name}`, autocomplete: 'off' });
  const error = h('p', { className: 'error', id: 'expiration-error', role: 'alert' });
  const done = async () => {
    await datasetView(document.getElementById('main'), id);
    const status = document.getElementById('expiration-status');
    if (status) status.focus();
  };
  const send = async (method, path, body) => {
    error.textContent = '';
    const resp = await api(path, { method, body });
    if (!resp.ok) { error.textContent = problemText(resp); day.focus(); return; }
    await done();
  };
  const form = h('form', { className: 'start-run', id: 'expiration-form', noValidate: true, 'aria-labelledby': 'expiration-form-title', onsubmit: (e) => {
    e.preventDefault();
    if (!day.value) { error.textContent = 'Choose the day of the deletion.'; day.focus(); return; }
    if (day.value < earliest) { error.textContent = `The day must be ${earliest} or later: a deletion is scheduled at least a day ahead.`; day.focus(); return; }
    if (expiry) send('PUT', `/data/core/hygiene/ttl/${encodeURIComponent(id)}`, { expiry: day.value });
    else send('POST', '/data/core/hygiene/ttl', { datasetId: id, expiry: day.value, displayName: name.value.trim() || `Retire ${ds.name}` });
  } },
  h('h3', { id: 'expiration-form-title' }, expiry ? 'Move the deletion' : 'Schedule a deletion'),
  h('div', { className: 'row' },
    h('div', {}, h('label', { htmlFor: day.id }, 'Delete on (UTC)'), day),
    name ? h('div', {}, h('label', { htmlFor: name.id }, 'Name'), name) : null),
  h('p', { className: 'hint', id: 'expiration-hint' }, 'At midnight UTC of that day the dataset and all its rows are deleted, unless it is held then. It is recorded in the audit log.'),
  error,
  h('p', { className: 'actions-left' },
    h('button', { type: 'submit', className: 'primary', id: 'expiration-save' }, expiry ? 'Move the deletion' : 'Schedule the deletion'),
    expiry ? cancelButton(id, error, send) : null));
  section.append(form);
  return section;
}

// cancelButton asks once more before cancelling the deletion.
function cancelButton(id, error, send) {
  const cell = h('span', {});
  const ask = h('button', { type: 'button', id: 'expiration-cancel' }, 'Cancel the deletion');
  ask.addEventListener('click', () => {
    const confirm = h('button', { type: 'button', className: 'primary', id: 'expiration-cancel-confirm',
      onclick: () => send('DELETE', `/data/core/hygiene/ttl/${encodeURIComponent(id)}`) }, 'Confirm: keep the dataset');
    const keep = h('button', { type: 'button', onclick: () => { cell.replaceChildren(ask); ask.focus(); } }, 'Leave it scheduled');
    cell.replaceChildren(confirm, ' ', keep);
    confirm.focus();
  });
  cell.append(ask);
  return cell;
}

function holdsSection(id, resp) {
  const section = h('section', { 'aria-labelledby': 'holds-title', id: 'holds' }, h('h2', { id: 'holds-title' }, 'Legal holds'));
  if (!resp.ok) {
    section.append(h('p', { className: 'error', role: 'alert' }, `The holds could not be read: ${problemText(resp)}`));
    return section;
  }
  const manage = can('retention.hold');
  const holds = resp.data.holds;
  section.append(h('p', { id: 'holds-status', role: 'status' }, holds.length
    ? `Held: ${count(holds.length)} active ${holds.length === 1 ? 'hold' : 'holds'}. Runs delete none of this dataset's rows, and it cannot be deleted, until every hold is released.`
    : 'Not held: runs delete its expired rows as its retention says.'));
  if (holds.length) {
    section.append(h('div', { className: 'table-wrap' }, h('table', { className: 'inventory', id: 'holds-table' },
      h('caption', { className: 'visually-hidden' }, 'Active legal holds, oldest first'),
      h('thead', {}, h('tr', {}, ['Reason', 'Reference', 'Placed by', 'Placed', manage ? 'Release' : null].filter(Boolean).map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, holds.map((hd) => h('tr', { 'data-id': hd.id },
        h('th', { scope: 'row', className: 'reason' }, hd.reason),
        h('td', {}, hd.reference || '—'),
        h('td', {}, hd.placedBy),
        h('td', {}, time(Date.parse(hd.placedAt))),
        manage ? h('td', {}, releaseButton(id, hd)) : null))))));
  }
  section.append(manage ? placeForm(id) : h('p', { className: 'notice', id: 'holds-read-only' },
    'Placing and releasing holds takes the retention.hold scope, which your token lacks.'));
  return section;
}

// releaseButton asks once more before releasing: a release lets the next run delete what is expired.
function releaseButton(id, hd) {
  const cell = h('span', { className: 'release' });
  const ask = h('button', { type: 'button', className: 'release-ask' }, 'Release', h('span', { className: 'visually-hidden' }, ` the hold "${hd.reason}"`));
  const error = h('span', { className: 'error', role: 'alert' });
  ask.addEventListener('click', () => {
    const confirm = h('button', { type: 'button', className: 'primary release-confirm', onclick: async () => {
      const resp = await api(`/dataSets/${encodeURIComponent(id)}/holds/${encodeURIComponent(hd.id)}`, { method: 'DELETE' });
      if (!resp.ok) { error.textContent = problemText(resp); return; }
      await datasetView(document.getElementById('main'), id);
      const status = document.getElementById('holds-status');
      if (status) status.focus();
    } }, 'Confirm release');
    const cancel = h('button', { type: 'button', onclick: () => { cell.replaceChildren(ask, error); ask.focus(); } }, 'Keep it');
    cell.replaceChildren(h('span', { className: 'muted' }, 'The next run may delete its expired rows. '), confirm, ' ', cancel, error);
    confirm.focus();
  });
  cell.append(ask, error);
  return cell;
}

function placeForm(id) {
  const reason = h('textarea', { id: 'hold-reason', name: 'reason', rows: 2, maxLength: 1000, required: true, 'aria-describedby': 'hold-reason-hint hold-error' });
  const reference = h('input', { id: 'hold-reference', name: 'reference', maxLength: 200, autocomplete: 'off' });
  const error = h('p', { className: 'error', id: 'hold-error', role: 'alert' });
  // The API's validation speaks for itself: its message is shown in place, as the retention dialog does.
  return h('form', { className: 'start-run', id: 'place-hold', noValidate: true, 'aria-labelledby': 'place-hold-title', onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = '';
    const body = { reason: reason.value };
    if (reference.value.trim()) body.reference = reference.value.trim();
    const resp = await api(`/dataSets/${encodeURIComponent(id)}/holds`, { method: 'POST', body });
    if (!resp.ok) { error.textContent = problemText(resp); reason.focus(); return; }
    await datasetView(document.getElementById('main'), id);
  } },
  h('h3', { id: 'place-hold-title' }, 'Place a hold'),
  h('label', { htmlFor: reason.id }, 'Reason'), reason,
  h('p', { className: 'hint', id: 'hold-reason-hint' }, '1 to 1,000 characters, kept in the audit log with who placed it.'),
  h('label', { htmlFor: reference.id }, 'Reference (optional)'), reference,
  error,
  h('p', {}, h('button', { type: 'submit', className: 'primary', id: 'hold-place' }, 'Place the hold')));
}

// The sources of a row's expiry (governedBy.source of GET …/rows/{_id}/expiry), as the page words them.
const expirySources = {
  setting: 'The TTL in force',
  earlierSetting: 'An earlier, shorter TTL',
  rowTtl: 'The row\'s own _ttl',
  rowExpiresAt: 'The row\'s own _expiresAt',
  override: 'The row\'s own expiry (_expiresAt or _ttl, stored before the service recorded which)',
  neverExpires: 'Never expires (_ttl: -1)',
  noTtl: 'No TTL expires it',
};

// explainSection asks the API why a row is still stored and when a run deletes it, by the row's _id: the answer
// comes from the same rule as reads and runs, so the page only lays it out.
function explainSection(id) {
  const section = h('section', { 'aria-labelledby': 'explain-title', id: 'explain' }, h('h2', { id: 'explain-title' }, 'Explain a row'));
  const rowId = h('input', { id: 'explain-id', name: '_id', maxLength: 256, required: true, autocomplete: 'off', spellcheck: false, 'aria-describedby': 'explain-hint explain-error' });
  const store = h('select', { id: 'explain-store', name: 'store' },
    h('option', { value: 'adobe_lakeHouse' }, 'Data lake'), h('option', { value: 'adobe_unifiedProfile' }, 'Profile'));
  const error = h('p', { className: 'error', id: 'explain-error', role: 'alert' });
  const result = h('div', { id: 'explain-result', role: 'status' });
  const form = h('form', { className: 'start-run', id: 'explain-form', noValidate: true, 'aria-labelledby': 'explain-title', onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = '';
    result.replaceChildren();
    if (!rowId.value) { error.textContent = 'Enter the row\'s _id.'; rowId.focus(); return; }
    const resp = await api(`/dataSets/${encodeURIComponent(id)}/rows/${encodeURIComponent(rowId.value)}/expiry?store=${store.value}`);
    if (!resp.ok) { error.textContent = problemText(resp); rowId.focus(); return; }
    result.replaceChildren(explanation(resp.data));
  } },
  h('div', { className: 'row' },
    h('div', {}, h('label', { htmlFor: rowId.id }, 'Row _id'), rowId),
    h('div', {}, h('label', { htmlFor: store.id }, 'Store'), store)),
  h('p', { className: 'hint', id: 'explain-hint' }, 'Why the row is still stored, what sets its expiry, and which run deletes it.'),
  error,
  h('p', {}, h('button', { type: 'submit', className: 'primary', id: 'explain-submit' }, 'Explain')));
  section.append(form, result);
  return section;
}

// ownExpiryField says which field of the row set its own expiry: a _ttl in days after its clock (periods are whole
// days), an _expiresAt, or unknown for a row stored before the service recorded it.
function ownExpiryField(x) {
  if (x.ownExpiryField === '_ttl') return `_ttl, ${count(x.ownTtlSeconds / 86400)} days after its clock`;
  if (x.ownExpiryField === '_expiresAt') return '_expiresAt';
  return 'from _expiresAt or _ttl; stored before the service recorded which';
}

// explanation lays out the API's explanation of a row as a list of facts.
function explanation(x) {
  const at = (v) => time(v == null ? null : Date.parse(v));
  const fact = (label, ...value) => [h('dt', {}, label), h('dd', {}, ...value)];
  const setting = x.governedBy.setting;
  return h('dl', { className: 'facts', id: 'explain-facts' },
    fact('Row', h('code', {}, x._id)),
    fact(x.clock.kind === 'lastWrite' ? 'Clock (last write)' : 'Clock (event time)', at(x.clock.value)),
    fact('Ingested', at(x.ingestedAt)),
    fact('Expiry set by', h('span', { className: 'source', title: x.governedBy.message }, expirySources[x.governedBy.source] || x.governedBy.source),
      setting ? ` — setting ${setting.version}, ${period(setting.ttlValue)}${setting.current ? ', in force' : ''}` : ''),
    x.ownExpiresAt ? fact('Own expiry', at(x.ownExpiresAt), ` (${ownExpiryField(x)})`) : [],
    fact('Expires', at(x.expiresAt), x.expired ? h('span', { className: 'expired' }, ' (expired: hidden from reads)') : ''),
    fact('Deletable from', at(x.deletableAt), ` (grace ${period(x.graceValue)})`),
    fact('Held by', x.heldBy.length ? x.heldBy.map((hd) => hd.reason).join(', ') : 'No hold'),
    fact('Next run that deletes it', x.nextRunAt ? at(x.nextRunAt) : 'None'));
}
