// Retention runs: the schedule (GET /retention/schedule), the run history (GET /retention/runs), a form to start a
// manual run or a dry run for chosen datasets (POST /retention/runs), and one run's detail with its per-dataset parts
// (GET /retention/runs/{id}), polled while the run is pending or running.

import { api, can, problemText } from './session.js';
import { count, h, time } from './format.js';

/** Runs on a page of the history. */
export const runsPageSize = 20;

/** How often a run's detail asks again while the run is under way. */
export const pollMs = 1000;

const storeLabels = { adobe_lakeHouse: 'Data lake', adobe_unifiedProfile: 'Profile store' };
const finished = ['succeeded', 'failed', 'partial'];

/** Renders #/runs (schedule, start form, history) or #/runs/{id} (one run) into main. */
export async function runsView(main, params, path) {
  const id = path.split('/')[1];
  if (id) return runView(main, decodeURIComponent(id));
  const page = Math.max(0, Number(params.get('page')) || 0);
  const schedule = h('section', { 'aria-labelledby': 'schedule-title' }, h('h2', { id: 'schedule-title' }, 'Schedule'),
    h('p', { className: 'status', id: 'schedule' }, 'Loading the schedule…'));
  const status = h('p', { className: 'status', id: 'runs-status', role: 'status' }, 'Loading runs…');
  const table = h('table', { className: 'inventory', id: 'runs' },
    h('caption', { className: 'visually-hidden' }, 'Retention runs, newest first'),
    h('thead', {}, h('tr', {}, ['Run', 'Status', 'Trigger', 'Store', 'Scheduled for', 'Datasets', 'Rows deleted', 'Duration']
      .map((c, i) => h('th', { scope: 'col', className: i >= 5 ? 'num' : '' }, c)))),
    h('tbody', {}, Array.from({ length: 3 }, () => h('tr', { className: 'placeholder' }, Array.from({ length: 8 }, () => h('td', {}, '\u00a0'))))));
  const pager = h('nav', { className: 'pager', 'aria-label': 'Pages' });
  main.replaceChildren(h('h1', {}, 'Retention runs'), schedule, can('retention.run') ? startForm() : h('p', { className: 'notice', id: 'runs-read-only' },
    'Your token lacks the retention.run scope, so it cannot start runs; the history below is what it may read.'),
  h('h2', {}, 'History'), status, h('div', { className: 'table-wrap' }, table), pager);
  showSchedule(schedule.querySelector('#schedule'));
  const resp = await api(`/retention/runs?${new URLSearchParams({ limit: String(runsPageSize), start: String(page * runsPageSize) })}`);
  if (!resp.ok) { status.replaceChildren(h('span', { className: 'error', role: 'alert' }, `The runs could not be listed: ${problemText(resp)}`)); return; }
  const runs = resp.data._embedded.runs;
  table.tBodies[0].replaceChildren(...runs.map(runRow));
  status.textContent = runs.length ? `Showing runs ${count(page * runsPageSize + 1)} to ${count(page * runsPageSize + runs.length)}.`
    : page ? 'No more runs.' : 'No runs yet in this sandbox — the schedule above starts them, or start one with the form.';
  const go = (p) => { location.hash = `#/runs${p ? `?page=${p}` : ''}`; };
  pager.replaceChildren(
    h('button', { type: 'button', disabled: page === 0, onclick: () => go(page - 1) }, 'Previous page'),
    h('span', {}, `Page ${count(page + 1)}`),
    h('button', { type: 'button', disabled: !(resp.data._links || {}).next, onclick: () => go(page + 1) }, 'Next page'));
}

async function showSchedule(el) {
  const resp = await api('/retention/schedule');
  if (!resp.ok) { el.replaceChildren(h('span', { className: 'error' }, `The schedule could not be read: ${problemText(resp)}`)); return; }
  const list = resp.data.schedules;
  if (!list.length) { el.textContent = 'No scheduled runs: runs start only from this form or the API.'; return; }
  el.replaceChildren(h('ul', { className: 'schedule' }, list.map((s) => h('li', { 'data-store': s.store },
    h('strong', {}, storeLabels[s.store] || s.store), ': ', h('code', {}, s.cron), ` (cron, ${s.timeZone}); next run `,
    s.nextRun ? time(Date.parse(s.nextRun)) : 'not known', '.'))));
}

// duration is how long a run took, or has taken so far, in words.
function duration(run) {
  if (!run.startedAt) return '—';
  const ms = (run.finishedAt ? Date.parse(run.finishedAt) : Date.now()) - Date.parse(run.startedAt);
  if (ms < 1000) return `${count(ms)} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${count(Math.round(ms / 60000))} min`;
}

function runRow(run) {
  return h('tr', { 'data-id': run.id, 'data-status': run.status },
    h('th', { scope: 'row' }, h('a', { href: `#/runs/${encodeURIComponent(run.id)}` }, run.id.slice(0, 8), h('span', { className: 'visually-hidden' }, ` run ${run.id}`)),
      run.dryRun ? h('span', { className: 'tag' }, 'dry run') : null),
    h('td', { className: 'run-status' }, statusBadge(run.status)),
    h('td', {}, run.trigger),
    h('td', {}, storeLabels[run.store] || run.store),
    h('td', {}, run.scheduledFor ? time(Date.parse(run.scheduledFor)) : '—'),
    h('td', { className: 'num' }, `${count(run.progress.datasetsDone)} of ${count(run.progress.datasetsTotal)}`),
    // A dry run deletes nothing: its count is what it would delete, and says so.
    h('td', { className: 'num' }, run.dryRun ? `none (${count(run.progress.rowsDeleted)} to delete)` : count(run.progress.rowsDeleted)),
    h('td', { className: 'num' }, duration(run)));
}

function statusBadge(status) {
  return h('span', { className: `badge ${status}` }, status);
}

// startForm starts a manual run of the chosen store for the chosen datasets (all of the sandbox's when none is
// chosen); datasets are found by name, so the form works the same with ten datasets or ten thousand.
function startForm() {
  const chosen = new Map();
  const store = h('select', { id: 'run-store', name: 'store' },
    Object.entries(storeLabels).map(([k, v]) => h('option', { value: k }, v)));
  const dry = h('input', { id: 'run-dry', name: 'dryRun', type: 'checkbox', checked: true });
  const find = h('input', { id: 'run-find', type: 'search', maxLength: 256, autocomplete: 'off', 'aria-describedby': 'run-chosen' });
  const matches = h('div', { className: 'matches', id: 'run-matches' });
  const summary = h('p', { className: 'hint', id: 'run-chosen', role: 'status' }, 'No dataset chosen: the run covers every dataset of this sandbox.');
  const error = h('p', { className: 'error', id: 'run-error', role: 'alert' });
  const refresh = () => {
    summary.textContent = chosen.size ? `Chosen: ${[...chosen.values()].join(', ')}.` : 'No dataset chosen: the run covers every dataset of this sandbox.';
  };
  const search = async () => {
    const q = new URLSearchParams({ limit: '20', orderBy: 'name', properties: 'name' });
    if (find.value.trim()) q.set('property', `name~${find.value.trim()}`);
    const resp = await api(`/dataSets?${q}`);
    if (!resp.ok) { matches.replaceChildren(h('p', { className: 'error' }, problemText(resp))); return; }
    const found = Object.entries(resp.data || {});
    matches.replaceChildren(found.length ? h('fieldset', {}, h('legend', {}, 'Datasets found (up to 20)'),
      found.map(([id, ds]) => {
        const box = h('input', { type: 'checkbox', id: `run-ds-${id}`, value: id, checked: chosen.has(id), onchange: () => {
          if (box.checked) chosen.set(id, ds.name); else chosen.delete(id);
          refresh();
        } });
        return h('div', { className: 'check' }, box, h('label', { htmlFor: box.id }, ds.name));
      })) : h('p', { className: 'muted' }, 'No dataset matches.'));
  };
  const form = h('form', { className: 'start-run', id: 'start-run', 'aria-labelledby': 'start-title', onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = '';
    const body = { store: store.value, dryRun: dry.checked };
    if (chosen.size) body.datasetIds = [...chosen.keys()];
    const resp = await api('/retention/runs', { method: 'POST', body });
    if (!resp.ok) { error.textContent = problemText(resp); return; }
    location.hash = `#/runs/${encodeURIComponent(resp.data.id)}`;
  } },
  h('h2', { id: 'start-title' }, 'Start a run'),
  h('div', { className: 'filters' },
    h('div', {}, h('label', { htmlFor: store.id }, 'Store'), store),
    h('div', {}, h('label', { htmlFor: find.id }, 'Find datasets by name'), find),
    h('button', { type: 'button', id: 'run-search', onclick: search }, 'Find'),
    h('div', { className: 'check' }, dry, h('label', { htmlFor: dry.id }, 'Dry run (count, delete nothing)'))),
  matches, summary, error,
  h('button', { type: 'submit', className: 'primary', id: 'run-start' }, 'Start the run'));
  find.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); search(); } });
  return form;
}

// runView shows one run and asks again every pollMs while it is under way and its page is still shown.
async function runView(main, id) {
  const hash = location.hash;
  const names = new Map();
  main.replaceChildren(h('p', { className: 'loading' }, 'Loading the run…'));
  let first = true;
  let last = '';
  for (;;) {
    const resp = await api(`/retention/runs/${encodeURIComponent(id)}`);
    if (location.hash !== hash) return;
    if (!resp.ok) {
      main.replaceChildren(h('h1', {}, 'Retention run'), h('p', { className: 'error', role: 'alert' }, `This run could not be read: ${problemText(resp)}`),
        h('p', {}, h('a', { href: '#/runs' }, 'All runs')));
      return;
    }
    await datasetNames(resp.data, names);
    if (location.hash !== hash) return;
    // Drawn again only when the run moved: main is a live region, so a redraw is read out, and it moves focus.
    const seen = JSON.stringify(resp.data);
    if (seen !== last) drawRun(main, resp.data, names);
    last = seen;
    if (first) { main.focus(); first = false; }
    if (finished.includes(resp.data.status)) return;
    await new Promise((resolve) => { setTimeout(resolve, pollMs); });
    if (location.hash !== hash) return;
  }
}

// datasetNames fills names with the names of the run's datasets not yet known (one request each, once per view):
// a name, or null for a dataset deleted since (404), or undefined when it could not be read.
async function datasetNames(run, names) {
  const missing = run.datasets.map((d) => d.datasetId).filter((id) => !names.has(id)).slice(0, 50);
  await Promise.all(missing.map(async (id) => {
    const resp = await api(`/dataSets/${encodeURIComponent(id)}?properties=name`);
    names.set(id, resp.ok && resp.data[id] ? resp.data[id].name : resp.status === 404 ? null : undefined);
  }));
}

// datasetCell names a run's dataset: a link to its page, "deleted dataset" with its id once it is gone, or the id.
function datasetCell(id, names) {
  const name = names.get(id);
  if (name === null) return h('span', { className: 'ds-deleted' }, 'Deleted dataset ', h('code', {}, id));
  if (name === undefined) return h('code', {}, id);
  return h('a', { className: 'ds-link', href: `#/datasets/${encodeURIComponent(id)}` }, name);
}

function drawRun(main, run, names) {
  const p = run.progress;
  const fact = (label, value) => [h('dt', {}, label), h('dd', {}, value)];
  const underway = !finished.includes(run.status);
  main.replaceChildren(
    h('p', {}, h('a', { href: '#/runs' }, '← All runs')),
    h('h1', {}, `${run.dryRun ? 'Dry run' : 'Run'} ${run.id}`),
    h('div', { className: 'progress', id: 'run-progress' },
      h('label', { htmlFor: 'run-progress-bar' }, underway ? 'In progress' : 'Done'),
      h('progress', { id: 'run-progress-bar', max: Math.max(1, p.datasetsTotal), value: p.datasetsDone }),
      h('span', { id: 'run-progress-text', role: 'status' }, `${count(p.datasetsDone)} of ${count(p.datasetsTotal)} datasets, ${count(p.rowsDeleted)} rows ${run.dryRun ? 'would be deleted' : 'deleted'}; ${run.status}${underway ? ' (updated every second)' : ''}.`)),
    h('dl', { className: 'facts', id: 'run-facts' },
      fact('Status', statusBadge(run.status)), fact('Trigger', run.trigger), fact('Store', storeLabels[run.store] || run.store),
      fact('Dry run', run.dryRun ? 'yes: nothing is deleted' : 'no'),
      fact('Scheduled for', run.scheduledFor ? time(Date.parse(run.scheduledFor)) : '—'),
      fact('Rows expired as of', time(Date.parse(run.evaluatedAt))),
      fact('Created', time(Date.parse(run.createdAt))), fact('Started', run.startedAt ? time(Date.parse(run.startedAt)) : '—'),
      fact('Finished', run.finishedAt ? time(Date.parse(run.finishedAt)) : '—'), fact('Duration', duration(run)),
      run.error ? fact('Error', h('span', { className: 'error' }, run.error)) : null),
    h('h2', {}, 'Datasets'),
    run.datasets.length ? h('div', { className: 'table-wrap' }, h('table', { className: 'inventory', id: 'run-parts' },
      h('caption', { className: 'visually-hidden' }, 'Each dataset\'s part of the run'),
      h('thead', {}, h('tr', {}, ['Dataset', 'Status', 'TTL', run.dryRun ? 'Rows to delete' : 'Rows deleted', run.dryRun ? 'Partitions to drop' : 'Partitions dropped', 'Error']
        .map((c, i) => h('th', { scope: 'col', className: i === 3 || i === 4 ? 'num' : '' }, c)))),
      h('tbody', {}, run.datasets.map((d) => h('tr', { 'data-id': d.datasetId, 'data-status': d.status },
        h('th', { scope: 'row' }, datasetCell(d.datasetId, names)),
        h('td', {}, statusBadge(d.status), d.status === 'held' ? h('span', { className: 'muted' }, ' under a legal hold: nothing deleted') : null),
        h('td', {}, d.ttlValue === null ? 'Keep forever' : d.ttlValue),
        h('td', { className: 'num' }, count(d.rowsDeleted)),
        h('td', { className: 'num' }, count(d.partitionsDropped)),
        h('td', {}, d.error || '')))))) : h('p', { className: 'muted', id: 'run-no-parts' }, underway ? 'The run has not split into datasets yet.' : 'This run had no dataset of this sandbox to process.'));
}
