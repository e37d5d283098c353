// The Set data retention dialog: a number and a unit for each store, with its limits; beside them the data
// distribution chart of GET /ttl/{id}/preview, whose marked bars are what the chosen value would delete. Saving
// sends PATCH /v2/dataSets/{id} with If-Match, so a change made meanwhile is refused (412) rather than overwritten.

import { api, can, problemText, route } from './session.js';
import { before, count, h, period, splitPeriod, units } from './format.js';

const stores = [
  { key: 'adobe_lakeHouse', label: 'Data lake' },
  { key: 'adobe_unifiedProfile', label: 'Profile store' },
];

/** How long the value must rest before the chart asks the API again: typing "365" costs one preview, not three. */
export const previewDelayMs = 300;

/** Opens the dialog for a dataset; focus returns to opener when it closes. */
export async function openRetentionDialog(id, name, opener) {
  const dialog = h('dialog', { className: 'retention', 'aria-labelledby': 'retention-title' });
  document.body.append(dialog);
  dialog.addEventListener('close', () => { dialog.remove(); if (opener) opener.focus(); });
  dialog.append(h('h2', { id: 'retention-title' }, `Set data retention: ${name}`), h('p', { role: 'status' }, 'Loading…'));
  dialog.showModal();
  await load(dialog, id, name);
}

// load fills the dialog from the dataset (current values, ETag) and its limits; it runs again on Reload.
async function load(dialog, id, name) {
  const [dsResp, ttlResp] = await Promise.all([api(`/dataSets/${encodeURIComponent(id)}`), api(`/ttl/${encodeURIComponent(id)}`)]);
  const failed = [dsResp, ttlResp].find((r) => !r.ok);
  if (failed) {
    dialog.replaceChildren(h('h2', { id: 'retention-title' }, `Set data retention: ${name}`),
      h('p', { className: 'error', role: 'alert' }, problemText(failed)),
      h('div', { className: 'actions' }, h('button', { type: 'button', onclick: () => dialog.close() }, 'Close')));
    return;
  }
  const ds = dsResp.data[id];
  const limits = ttlResp.data[id].extensions;
  const state = { id, etag: dsResp.headers.get('ETag'), ds, chartStore: 'adobe_lakeHouse', timer: 0, abort: null };
  render(dialog, state, limits);
}

function current(ds, store) {
  return (((ds.extensions || {})[store] || {}).rowExpiration || {}).ttlValue;
}

function render(dialog, state, limits) {
  const readOnly = !can('datasets.manage');
  const managedBy = state.ds.classification.managedBy;
  const fields = {};
  const sets = stores.map((s) => {
    const f = storeFields(s, current(state.ds, s.key), limits[s.key].rowExpiration, managedBy, readOnly);
    fields[s.key] = f;
    f.onchange = () => { state.chartStore = s.key; crossStoreHint(); schedulePreview(state, fields, chart); };
    return f.fieldset;
  });
  const cross = h('p', { className: 'hint cross', id: 'cross-store' },
    'A profile copy never outlives its source: the profile retention may not be longer than the data lake\'s (keep forever counts as the longest). ',
    'Shortening the data lake below the profile lowers the profile to the same value.');
  const crossStoreHint = () => {
    const lake = fields.adobe_lakeHouse.value();
    const prof = fields.adobe_unifiedProfile.value();
    cross.classList.toggle('bites', lake !== undefined && prof !== undefined && longer(prof, lake));
  };
  const chart = chartSection();
  const general = h('p', { className: 'error', id: 'retention-error', role: 'alert' });
  const save = h('button', { type: 'submit', className: 'primary' }, 'Save');
  const form = h('form', { noValidate: true, onsubmit: (e) => { e.preventDefault(); submit(dialog, state, fields, general, limits); } },
    h('div', { className: 'dialog-body' }, h('div', { className: 'stores' }, sets, cross), chart.section),
    readOnly ? h('p', { className: 'notice', id: 'read-only' }, 'Read only: your token lacks the datasets.manage scope, so these values cannot be changed here.') : null,
    general,
    h('div', { className: 'actions' },
      h('button', { type: 'button', onclick: () => dialog.close() }, readOnly ? 'Close' : 'Cancel'),
      readOnly ? null : save));
  dialog.replaceChildren(h('h2', { id: 'retention-title' }, `Set data retention: ${state.ds.name}`), form);
  crossStoreHint();
  preview(state, fields, chart);
  const first = dialog.querySelector('input:not([disabled]), select:not([disabled])') || dialog.querySelector('button');
  first.focus();
}

// storeFields builds one store's fieldset: number, unit, keep forever where the policy allows it, limits, error.
function storeFields(s, value, lim, managedBy, readOnly) {
  const split = splitPeriod(value);
  const idp = `ttl-${s.key}`;
  const number = h('input', { id: `${idp}-value`, name: `${idp}-value`, type: 'number', min: 1, step: 1, inputMode: 'numeric', value: split ? split.value : '', disabled: readOnly, 'aria-describedby': `${idp}-limits ${idp}-error` });
  const unit = h('select', { id: `${idp}-unit`, name: `${idp}-unit`, disabled: readOnly },
    units.map((u) => h('option', { value: u.letter, selected: (split ? split.letter : 'M') === u.letter }, u.many)));
  // SYSTEM datasets keep system-imposed limits, so the API refuses null for them: the choice is not offered.
  const forever = managedBy === 'SYSTEM' ? null : h('input', { id: `${idp}-forever`, type: 'checkbox', checked: value === null, disabled: readOnly });
  const error = h('p', { className: 'error', id: `${idp}-error`, role: 'alert' });
  const f = {
    error,
    value: () => (forever && forever.checked ? null : number.value === '' ? undefined : `P${number.value.trim()}${unit.value}`),
    initial: value,
    onchange: null,
  };
  f.problem = () => limitProblem(f.value(), lim);
  const sync = () => { number.disabled = unit.disabled = readOnly || (forever && forever.checked); };
  const changed = () => { error.textContent = ''; sync(); if (f.onchange) f.onchange(); };
  number.addEventListener('input', changed);
  unit.addEventListener('change', changed);
  if (forever) forever.addEventListener('change', changed);
  sync();
  f.fieldset = h('fieldset', { className: 'store', id: idp },
    h('legend', {}, `${s.label} `, h('code', {}, s.key)),
    h('div', { className: 'row' },
      h('div', {}, h('label', { htmlFor: number.id }, 'Keep rows for'), number),
      h('div', {}, h('label', { htmlFor: unit.id }, 'Unit'), unit)),
    forever ? h('div', { className: 'check' }, forever, h('label', { htmlFor: forever.id }, 'Keep forever (no expiration)')) : null,
    h('p', { className: 'hint', id: `${idp}-limits` },
      `Minimum ${period(lim.minValue)}, maximum ${lim.maxValue === null ? 'none' : period(lim.maxValue)}, default ${period(lim.defaultValue)}. Now: ${period(value)}.`),
    error);
  return f;
}

// limitProblem says in plain words why the API would refuse value for a store with limits lim (ttl-out-of-range),
// or '' when it is within them; the dialog checks it before saving and before drawing what the value would delete.
export function limitProblem(value, lim) {
  // Keep forever is offered only where the policy allows it (not for SYSTEM datasets), whatever the maximum.
  if (value === undefined || value === null) return '';
  if (!/^P\d+[DWMY]$/.test(value)) return 'Enter a whole number of days, weeks, months or years.';
  if (/^P0+[DWMY]$/.test(value)) return 'Enter a number of at least 1, or keep forever.';
  if (longer(lim.minValue, value)) return `Too short: ${period(value)} is less than this dataset's minimum, ${period(lim.minValue)}.`;
  if (lim.maxValue !== null && longer(value, lim.maxValue)) return `Too long: ${period(value)} is more than this dataset's maximum, ${period(lim.maxValue)}.`;
  return '';
}

// longer compares periods as the API does (1Y = 12M, 1M = 30D, 1W = 7D); null is the longest.
function longer(a, b) {
  const days = (p) => {
    if (p === null) return Infinity;
    const m = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?$/.exec(p);
    if (!m) return NaN;
    const [y, mo, w, d] = m.slice(1).map((v) => Number(v || 0));
    return (y * 12 + mo) * 30 + w * 7 + d;
  };
  return days(a) > days(b);
}

async function submit(dialog, state, fields, general, limits) {
  general.textContent = '';
  const ext = {};
  for (const s of stores) {
    const f = fields[s.key];
    f.error.textContent = '';
    const v = f.value();
    if (v === undefined) { f.error.textContent = 'Enter a number of days, weeks, months or years, or keep forever.'; return; }
    const problem = f.problem();
    if (problem) {
      f.error.textContent = problem;
      const input = dialog.querySelector(`#ttl-${s.key}-value`);
      if (input && !input.disabled) input.focus();
      return;
    }
    if (v !== f.initial) ext[s.key] = { rowExpiration: { ttlValue: v } };
  }
  if (Object.keys(ext).length === 0) { dialog.close(); return; }
  const resp = await api(`/v2/dataSets/${encodeURIComponent(state.id)}`, { method: 'PATCH', body: { extensions: ext }, headers: { 'If-Match': state.etag } });
  if (resp.ok) {
    dialog.close();
    // The inventory is drawn anew with the saved values; focus goes back to this dataset's button in it.
    await route();
    const again = document.querySelector(`#inventory tr[data-id="${CSS.escape(state.id)}"] button.link`);
    if (again) again.focus();
    return;
  }
  if (resp.status === 412) { changedMeanwhile(dialog, state); return; }
  // The API's own message, next to the field it names.
  const field = (resp.data && resp.data.field) || '';
  const target = stores.find((s) => field.includes(s.key));
  (target ? fields[target.key].error : general).textContent = problemText(resp);
  const input = target && dialog.querySelector(`#ttl-${target.key}-value`);
  if (input && !input.disabled) input.focus();
}

function changedMeanwhile(dialog, state) {
  const reload = h('button', { type: 'button', className: 'primary', onclick: () => load(dialog, state.id, state.ds.name) }, 'Reload');
  const box = h('div', { className: 'conflict', id: 'conflict', role: 'alert' },
    h('p', {}, h('strong', {}, 'This dataset changed meanwhile. '),
      'Someone saved it after you opened this dialog, so your values were not saved. Reload to see the current values, then choose again.'),
    reload);
  dialog.querySelector('form').prepend(box);
  for (const el of dialog.querySelectorAll('form input, form select, button[type=submit]')) el.disabled = true;
  reload.focus();
}

// The chart: an SVG of the dataset's rows by month of age, oldest left.
function chartSection() {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-labelledby', 'chart-summary');
  svg.setAttribute('viewBox', '0 0 480 200');
  svg.classList.add('chart');
  const summary = h('p', { id: 'chart-summary', className: 'summary', 'aria-live': 'polite' }, 'Loading the data distribution…');
  const section = h('section', { className: 'distribution', 'aria-labelledby': 'chart-title' },
    h('h3', { id: 'chart-title' }, 'Data distribution'),
    svg,
    h('p', { className: 'legend' }, h('span', { className: 'key kept' }), 'kept ', h('span', { className: 'key deleted' }), 'deleted by the chosen value (rows already expired stay deleted)'),
    summary);
  return { section, svg, summary };
}

function schedulePreview(state, fields, chart) {
  clearTimeout(state.timer);
  state.timer = setTimeout(() => preview(state, fields, chart), previewDelayMs);
}

async function preview(state, fields, chart) {
  const store = state.chartStore;
  const value = fields[store].value();
  if (state.abort) state.abort.abort();
  if (value === undefined) { chart.svg.replaceChildren(); chart.summary.textContent = 'Enter a value to see what it would delete.'; return; }
  // A value that cannot be saved deletes nothing: the chart shows no marks for it, and says why.
  const problem = fields[store].problem();
  if (problem) {
    chart.svg.replaceChildren();
    chart.summary.textContent = `${problem} Nothing is marked for a value that cannot be saved.`;
    delete chart.summary.dataset.rowsToDelete;
    return;
  }
  state.abort = new AbortController();
  const q = new URLSearchParams({ store, ttlValue: value === null ? 'null' : value });
  let resp;
  try {
    resp = await api(`/ttl/${encodeURIComponent(state.id)}/preview?${q}`, { signal: state.abort.signal });
  } catch {
    return; // a newer value's preview replaced this one
  }
  if (!resp.ok) { chart.summary.textContent = `No preview for this value: ${problemText(resp)}`; return; }
  draw(chart, resp.data, value, current(state.ds, store), stores.find((s) => s.key === store).label);
}

// draw marks the months a run would delete from: those older than the chosen value's cutoff, and those older than
// the current value's, since rows that expired under it stay expired under a longer value (no resurrection). The
// count stated is the API's exact one; the marks place it in time.
function draw(chart, p, value, now, label) {
  const buckets = [...p.distribution.buckets].sort((a, b) => a.month.localeCompare(b.month));
  const at = Date.parse(p.evaluatedAt);
  const cutoffs = [value, now].filter((v) => v != null).map((v) => before(at, v).getTime());
  const cutoff = cutoffs.length ? new Date(Math.max(...cutoffs)) : null;
  const max = Math.max(1, ...buckets.map((b) => b.rows));
  const width = 480;
  const height = 180;
  const slot = buckets.length ? width / buckets.length : width;
  const ns = 'http://www.w3.org/2000/svg';
  const bars = buckets.map((b, i) => {
    const [y, m] = b.month.split('-').map(Number);
    const end = Date.UTC(y, m, 1); // the first instant after the month
    const start = Date.UTC(y, m - 1, 1);
    const state = cutoff === null || start >= cutoff.getTime() ? 'kept' : end <= cutoff.getTime() ? 'deleted' : 'partly';
    const rect = document.createElementNS(ns, 'rect');
    const hgt = Math.max(1, (b.rows / max) * height);
    rect.setAttribute('x', String(i * slot + 1));
    rect.setAttribute('y', String(height - hgt));
    rect.setAttribute('width', String(Math.max(1, slot - 2)));
    rect.setAttribute('height', String(hgt));
    rect.setAttribute('class', `bar ${state}`);
    rect.dataset.month = b.month;
    const title = document.createElementNS(ns, 'title');
    title.textContent = `${b.month}: ${count(b.rows)} rows${state === 'kept' ? '' : state === 'deleted' ? ', deleted' : ', partly deleted'}`;
    rect.append(title);
    return rect;
  });
  const axis = (x, text, anchor) => {
    const t = document.createElementNS(ns, 'text');
    t.setAttribute('x', String(x));
    t.setAttribute('y', '196');
    t.setAttribute('text-anchor', anchor);
    t.setAttribute('class', 'axis');
    t.textContent = text;
    return t;
  };
  const labels = buckets.length ? [axis(0, buckets[0].month, 'start'), axis(width, buckets[buckets.length - 1].month, 'end')] : [axis(width / 2, 'no rows', 'middle')];
  chart.svg.replaceChildren(...bars, ...labels);
  const marked = bars.filter((r) => !r.classList.contains('kept')).length;
  chart.summary.textContent = value === null
    ? `${label}: keep forever deletes ${p.rowsToDelete ? `only the ${count(p.rowsToDelete)} rows already expired` : 'nothing'}; the dataset holds ${count(p.rowCount)} rows.`
    : `${label}: under ${period(value)}, a run now would delete ${count(p.rowsToDelete)} of ${count(p.rowCount)} rows (${count(marked)} of ${count(buckets.length)} months marked).`;
  chart.summary.dataset.rowsToDelete = String(p.rowsToDelete);
}
