// Formatting shared by the views: numbers with the viewer's separators, sizes, times in the viewer's zone with UTC
// on hover, and retention periods in words.

const numbers = new Intl.NumberFormat();

/** A count with thousands separators ("12,345"). */
export function count(n) {
  return n == null ? '—' : numbers.format(n);
}

/** A size in bytes as B, KB, MB, GB or TB (powers of 1,000, as storage is sold), one decimal above bytes. */
export function bytes(n) {
  if (n == null) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return i === 0 ? `${numbers.format(n)} B` : `${n.toFixed(1)} ${units[i]}`;
}

/** A <time> element: the instant in the viewer's time zone, its UTC form in the title and datetime. */
export function time(ms) {
  if (ms == null) return text('—');
  const d = new Date(ms);
  const el = document.createElement('time');
  el.dateTime = d.toISOString();
  el.title = d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  el.textContent = d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
  return el;
}

function text(s) { return document.createTextNode(s); }

/** The units of a retention value as the dialog offers them, with the letter of the ISO-8601 period. */
export const units = [
  { letter: 'D', one: 'day', many: 'days' },
  { letter: 'W', one: 'week', many: 'weeks' },
  { letter: 'M', one: 'month', many: 'months' },
  { letter: 'Y', one: 'year', many: 'years' },
];

/**
 * Splits a period of the API ("P3M", "P1Y6M") into one number and one unit for the dialog: a single unit as is,
 * years and months as months, anything else with days as days (30 to a month, as the API compares). null stays null.
 */
export function splitPeriod(p) {
  if (p == null) return null;
  const m = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?$/.exec(p);
  if (!m) return { value: '', letter: 'D' };
  const [y, mo, w, d] = m.slice(1).map((v) => Number(v || 0));
  const parts = [[y, 'Y'], [mo, 'M'], [w, 'W'], [d, 'D']].filter(([v]) => v > 0);
  if (parts.length === 1) return { value: String(parts[0][0]), letter: parts[0][1] };
  if (w === 0 && d === 0) return { value: String(y * 12 + mo), letter: 'M' };
  return { value: String(y * 360 + mo * 30 + w * 7 + d), letter: 'D' };
}

/** A period in words: "P3M" is "3 months", null "Keep forever". */
export function period(p) {
  if (p === undefined) return '—';
  if (p === null) return 'Keep forever';
  const s = splitPeriod(p);
  const u = units.find((x) => x.letter === s.letter);
  if (!u || s.value === '') return p;
  return `${numbers.format(Number(s.value))} ${s.value === '1' ? u.one : u.many}`;
}

/** The instant a period before t, in calendar arithmetic as Postgres subtracts an interval (UTC). */
export function before(t, p) {
  const m = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?$/.exec(p);
  const [y, mo, w, d] = m.slice(1).map((v) => Number(v || 0));
  const out = new Date(t);
  // Months first, the day clamped to the target month's last (31 March minus 1 month is 28 or 29 February).
  const day = out.getUTCDate();
  out.setUTCDate(1);
  out.setUTCMonth(out.getUTCMonth() - (y * 12 + mo));
  const last = new Date(Date.UTC(out.getUTCFullYear(), out.getUTCMonth() + 1, 0)).getUTCDate();
  out.setUTCDate(Math.min(day, last));
  out.setUTCDate(out.getUTCDate() - (w * 7 + d));
  return out;
}

/** h builds an element: h('td', {className: 'num'}, 'text', childNode). Text is never parsed as HTML. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k in el && !k.includes('-')) el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}
