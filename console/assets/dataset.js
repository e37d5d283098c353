// One dataset (#/datasets/{id}): its classification, retention and metrics, its pending dataset expiration (the
// adobe/hygiene/ttl tag of GET /dataSets/{id}), and its legal holds (GET /dataSets/{id}/holds), which callers with
// the retention.hold scope place and release here; others see them read only, since the API would refuse them.

import { api, can, problemText } from './app.js';
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
 * is released; a dash without a rowExpiration. */
export function nextJob(ds) {
  const re = (((ds.extensions || {}).adobe_lakeHouse) || {}).rowExpiration;
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
    expiry ? h('p', { className: 'notice', id: 'pending-expiration' }, 'This dataset is scheduled for deletion on ', time(expiry),
      ' (a pending dataset expiration; see GET /data/core/hygiene/ttl/', h('code', {}, id), ').') : null,
    h('dl', { className: 'facts', id: 'dataset-facts' },
      fact('Id', h('code', {}, id)),
      fact('Type', ds.classification ? ds.classification.dataBehavior : '—'),
      fact('Managed by', ds.classification ? ds.classification.managedBy : '—'),
      fact('Tags', Object.entries(ds.tags || {}).filter(([k]) => k !== expirationTag).map(([k, v]) => `${k}:${v.join(',')}`).join('  ') || '—'),
      fact('Data lake retention', expires ? period(re('adobe_lakeHouse').ttlValue) : 'n/a'),
      fact('Profile retention', re('adobe_unifiedProfile') ? period(re('adobe_unifiedProfile').ttlValue) : 'n/a'),
      fact('Rows', count(metrics.rowCount)), fact('Storage', bytes(metrics.storageSize)),
      fact('Last retention job', time(re('adobe_lakeHouse') && re('adobe_lakeHouse').lastCompleted)),
      fact('Next retention job', nextJob(ds))),
    expires ? h('p', {}, h('button', { type: 'button', id: 'open-retention', onclick: (e) => openRetentionDialog(id, ds.name, e.currentTarget) }, 'Set data retention')) : null,
    holdsSection(id, holdsResp)].filter(Boolean));
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
