// polylock console: renders the snapshots the server pushes (GET /api/events) and, when the
// console allows writes, asks it to force-unlock. Everything shown is set as text (lock names
// and client names come from Redis, so they are never parsed as HTML).
'use strict';

const token = new URLSearchParams(location.search).get('token');
const STUCK_MS = 60000;
let latest = null;

const $ = (id) => document.getElementById(id);

function withToken(path) {
  return token ? `${path}?token=${encodeURIComponent(token)}` : path;
}

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString();
}

function age(ms) {
  if (ms < 60000) return seconds(ms);
  if (ms < 3600000) return `${Math.floor(ms / 60000)} min`;
  return `${(ms / 3600000).toFixed(1)} h`;
}

// `worker-7 (pid 1234 on host-a)`, or the owner string without a client record.
function who(party) {
  if (!party.client_name) return party.owner;
  const where = [];
  if (party.client_pid != null) where.push(`pid ${party.client_pid}`);
  if (party.client_host) where.push(`on ${party.client_host}`);
  return where.length ? `${party.client_name} (${where.join(' ')})` : party.client_name;
}

function waitersOf(lock) {
  return lock.kind === 'read-write' ? lock.waiting_writers : lock.queue;
}

function matchesFilters(lock) {
  const search = $('search').value.trim().toLowerCase();
  const kind = $('kind-filter').value;
  const state = $('state-filter').value;
  if (kind && lock.label !== kind) return false;
  if (state === 'held' && !lock.held) return false;
  if (state === 'contended' && waitersOf(lock).length === 0) return false;
  if (state === 'stuck' && !lock.holders.some((h) => (h.held_for_ms || 0) > STUCK_MS)) return false;
  if (state === 'unrecorded' && !lock.holders.some((h) => !h.client_name)) return false;
  if (!search) return true;
  const parties = lock.holders.concat(waitersOf(lock));
  const haystack = [lock.name, lock.label]
    .concat(parties.map((p) => `${who(p)} ${p.owner}`))
    .join(' ')
    .toLowerCase();
  return haystack.includes(search);
}

// The sort keys, largest first; ties keep the server's name order.
const SORT_KEYS = {
  age: (lock) => Math.max(0, ...lock.holders.map((h) => h.held_for_ms || 0)),
  waiters: (lock) => waitersOf(lock).length,
  rate: (lock) => (lock.metrics ? lock.metrics.acquires_per_s : 0),
};

function sorted(locks) {
  const key = SORT_KEYS[$('sort').value];
  return key ? locks.slice().sort((a, b) => key(b) - key(a)) : locks;
}

function cell(row, label, content, className) {
  const td = element('td', null, className);
  td.dataset.label = label;
  if (content instanceof Node) td.append(content);
  else td.textContent = content;
  row.append(td);
  return td;
}

function holdersCell(lock, allowWrite) {
  const box = document.createDocumentFragment();
  if (!lock.held) {
    box.append(element('span', lock.kind.includes('semaphore') ? '–' : 'free'));
    return box;
  }
  for (const holder of lock.holders) {
    const line = element('div', null, 'holder');
    let text = who(holder);
    if (holder.count > 1) text += ` ×${holder.count}`;
    if (holder.mode) text += ` (${holder.mode})`;
    line.append(element('span', text, 'held'));
    if (holder.held_for_ms != null) line.append(` held ${age(holder.held_for_ms)}`);
    if (holder.client_name) line.append(' ', element('span', holder.owner, 'owner'));
    if (allowWrite) {
      const button = element('button', 'Force-unlock');
      button.type = 'button';
      button.dataset.focusKey = `unlock ${lock.name} ${holder.owner}`;
      button.setAttribute('aria-label', `Force-unlock ${lock.name} held by ${who(holder)}`);
      button.addEventListener('click', () => forceUnlock(lock, holder));
      line.append(' ', button);
    }
    box.append(line);
  }
  return box;
}

function waitersCell(lock) {
  const waiters = waitersOf(lock);
  if (waiters.length === 0) return '–';
  const list = element('ol', null, 'waiters');
  for (const waiter of waiters) list.append(element('li', who(waiter)));
  return list;
}

function permitsText(lock) {
  const parts = [];
  if (lock.permits_available != null) parts.push(`${lock.permits_available} available`);
  if (lock.kind === 'expirable-semaphore') parts.push(`${lock.permits.length} taken`);
  if (lock.fence_token != null) parts.push(`token ${lock.fence_token}`);
  return parts.length ? parts.join(', ') : '–';
}

function leaseText(lock) {
  if (lock.remaining_lease_ms != null) return seconds(lock.remaining_lease_ms);
  return lock.held ? 'no expiry' : '–';
}

const SVG = 'http://www.w3.org/2000/svg';
const SPARK_WIDTH = 90;
const SPARK_HEIGHT = 16;
// The readings the server keeps per lock (rate_history.rs): a full line spans the width.
const HISTORY_LENGTH = 60;

// An inline SVG line of `values` (oldest first; null is a gap), scaled to its own largest
// value, as wide as HISTORY_LENGTH readings; `label` says what it is to screen readers.
function sparkline(values, label) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'sparkline');
  svg.setAttribute('viewBox', `0 0 ${SPARK_WIDTH} ${SPARK_HEIGHT}`);
  svg.setAttribute('preserveAspectRatio', 'none'); // CSS sets its size; it stretches to fit
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  // The zero line, faint, so that the span of a minute shows before the data fills it.
  const base = document.createElementNS(SVG, 'line');
  base.setAttribute('class', 'base');
  base.setAttribute('x1', 0);
  base.setAttribute('x2', SPARK_WIDTH);
  base.setAttribute('y1', SPARK_HEIGHT - 0.5);
  base.setAttribute('y2', SPARK_HEIGHT - 0.5);
  svg.append(base);
  const top = Math.max(...values.filter((v) => v != null), 0) || 1;
  const step = SPARK_WIDTH / (HISTORY_LENGTH - 1);
  const left = SPARK_WIDTH - step * (values.length - 1);
  let points = [];
  const flush = () => {
    if (points.length === 1) points.unshift([points[0][0] - 2, points[0][1]]); // a dash, not a dot too small to see
    if (points.length) {
      const line = document.createElementNS(SVG, 'polyline');
      line.setAttribute('points', points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' '));
      svg.append(line);
    }
    points = [];
  };
  values.forEach((value, i) => {
    if (value == null) flush();
    else points.push([left + i * step, SPARK_HEIGHT - 1 - (value / top) * (SPARK_HEIGHT - 2)]);
  });
  flush();
  return svg;
}

const rate = (value) => (value >= 10 ? value.toFixed(0) : value.toFixed(1));

// Acquires/s, wait, time-outs/s and losses over the last readings, each a sparkline with its
// latest value; '–' when no client record reports the lock.
function activityCell(lock) {
  const history = lock.history;
  if (!history || history.acquires_per_s.length === 0) return '–';
  const box = element('div', null, 'activity');
  const measures = [
    ['acquires/s', history.acquires_per_s, rate],
    ['wait', history.avg_wait_ms, (ms) => (ms == null ? '–' : `${ms.toFixed(0)} ms`)],
    ['time-outs/s', history.timeouts_per_s, rate],
    ['lost', history.lost, String],
  ];
  for (const [name, values, show] of measures) {
    const latest = show(values[values.length - 1]);
    const line = element('div', null, 'measure');
    line.dataset.measure = name;
    line.append(element('span', name, 'measure-name'),
      sparkline(values, `${name} over the last ${values.length} readings, now ${latest}`),
      element('span', latest, 'measure-value'));
    box.append(line);
  }
  return box;
}

function renderLocks(snapshot) {
  const body = $('locks').querySelector('tbody');
  const kinds = new Set(snapshot.locks.map((lock) => lock.label));
  const kindFilter = $('kind-filter');
  const known = new Set(Array.from(kindFilter.options, (option) => option.value));
  for (const kind of [...kinds].sort()) {
    if (!known.has(kind)) kindFilter.append(new Option(kind, kind));
  }
  const shown = sorted(snapshot.locks.filter(matchesFilters));
  const rows = shown.map((lock) => {
    const row = element('tr');
    row.dataset.name = lock.name;
    cell(row, 'Kind', lock.label);
    const nameCell = cell(row, 'Name', lock.name, 'name');
    // A row not read at the last refresh waits for its turn (--reads-per-refresh): say its age.
    const rowAge = snapshot.read_ms - lock.seen_ms;
    if (rowAge >= snapshot.refresh_every_ms) {
      nameCell.append(' ', element('span', `read ${seconds(rowAge)} ago`, 'row-age'));
    }
    cell(row, 'Holders', holdersCell(lock, snapshot.allow_write));
    cell(row, 'Lease left', leaseText(lock));
    cell(row, 'Waiters', waitersCell(lock));
    cell(row, 'Permits / token', permitsText(lock));
    cell(row, 'Activity', activityCell(lock));
    return row;
  });
  body.replaceChildren(...rows);
  let count = `${shown.length} shown of ${snapshot.locks.length}`;
  if (snapshot.names_left_out) count += `, ${snapshot.names_left_out} more names not shown (--max-locks)`;
  $('lock-count').textContent = `(${count})`;
  const none = $('no-locks');
  none.hidden = shown.length > 0;
  none.textContent = snapshot.locks.length === 0
    ? `No lock, semaphore or lock in use matches the pattern '${snapshot.pattern}'.`
    : 'No lock matches the search and filters.';
}

// `orders:9 (2nd in line)`; `×2` when several of the client's acquires wait for it.
function waitText(wait) {
  let text = wait.lock;
  if (wait.count > 1) text += ` ×${wait.count}`;
  if (wait.place != null) text += ` (${ordinal(wait.place)} in line)`;
  return text;
}

function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : ({ 1: 'st', 2: 'nd', 3: 'rd' }[n % 10] || 'th');
  return `${n}${suffix}`;
}

function renderClients(snapshot) {
  const rows = snapshot.clients.map((client) => {
    const row = element('tr');
    cell(row, 'Name', client.name || client.client_id, 'name');
    cell(row, 'Host', client.host || '–');
    cell(row, 'Pid', client.pid != null ? client.pid : '–');
    cell(row, 'Connected', client.connected_ms != null
      ? `since ${clock(client.connected_ms)} (${age(Math.max(0, snapshot.unix_ms - client.connected_ms))} ago)` : '–');
    const holds = client.holds.map((hold) => hold.lock);
    cell(row, 'Holds', holds.length ? [...new Set(holds)].sort().join(', ') : '–');
    cell(row, 'Waits for', client.waits_for.length ? client.waits_for.map(waitText).join(', ') : '–');
    const locks = client.metrics ? client.metrics.locks : [];
    const acquired = locks.reduce((sum, lock) => sum + lock.acquired, 0);
    const lost = locks.reduce((sum, lock) => sum + lock.lost, 0);
    const waiting = locks.reduce((sum, lock) => sum + lock.waiters, 0);
    cell(row, 'Metrics', client.metrics
      ? `${locks.length} lock(s), ${acquired} acquired, ${waiting} waiting now, ${lost} lost` : '–');
    return row;
  });
  $('clients').querySelector('tbody').replaceChildren(...rows);
  $('client-count').textContent = `(${rows.length})`;
  $('no-clients').hidden = rows.length > 0;
}

function renderTimeline(snapshot) {
  const items = snapshot.timeline.slice().reverse().map((entry) => {
    const item = element('li', null, entry.kind);
    item.append(element('time', clock(entry.unix_ms)), ' ', element('span', entry.kind, 'kind'), ': ', entry.text);
    return item;
  });
  $('timeline').replaceChildren(...items);
  $('no-events').hidden = items.length > 0;
}

function showBanner(text) {
  const banner = $('banner');
  banner.hidden = !text;
  banner.textContent = text || '';
}

function render(snapshot) {
  latest = snapshot;
  const focusKey = document.activeElement && document.activeElement.dataset
    ? document.activeElement.dataset.focusKey : undefined;
  const mode = snapshot.allow_write ? 'force-unlock allowed' : 'read-only';
  const read = snapshot.read_ms ? `read at ${clock(snapshot.read_ms)}` : 'not read yet';
  $('source').textContent = `${snapshot.redis} · pattern '${snapshot.pattern}' · ${read} · ${mode}`;
  if (snapshot.error) {
    const tables = snapshot.read_ms
      ? `The tables show the last reading, of ${clock(snapshot.read_ms)}.` : 'Nothing could be read yet.';
    showBanner(`Redis is not answering: ${snapshot.error}. ${tables} Retrying every second.`);
  } else {
    showBanner(null);
  }
  renderLocks(snapshot);
  renderClients(snapshot);
  renderTimeline(snapshot);
  // A re-render replaces the buttons: keep the keyboard where it was.
  if (focusKey) {
    const again = Array.from(document.querySelectorAll('[data-focus-key]'))
      .find((node) => node.dataset.focusKey === focusKey);
    if (again) again.focus();
  }
}

async function forceUnlock(lock, holder) {
  const question = `Force-unlock ${lock.label} lock '${lock.name}' held by ${who(holder)}` +
    ` (owner ${holder.owner})?\nThe holder is not told until its next renewal; the next waiter gets the lock.`;
  if (!window.confirm(question)) return;
  const headers = { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const status = $('action-status');
  try {
    const response = await fetch('/api/force-unlock', {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: lock.name, holder: holder.owner }),
    });
    const answer = await response.json().catch(() => ({ message: `HTTP ${response.status}` }));
    status.textContent = response.ok ? `Done: ${answer.message}` : `Refused: ${answer.message}`;
  } catch (err) {
    status.textContent = `Failed: ${err}`;
  }
}

function connect() {
  const events = new EventSource(withToken('/api/events'));
  events.addEventListener('snapshot', (event) => render(JSON.parse(event.data)));
  events.addEventListener('error', async () => {
    // EventSource does not say why; ask once to tell a wrong token from a console gone.
    try {
      const response = await fetch(withToken('/api/snapshot'));
      if (response.status === 401) {
        events.close();
        showBanner('This console needs its token: open the address it printed (…/?token=…).');
        return;
      }
    } catch (err) {
      // the console itself is gone: EventSource keeps retrying
    }
    showBanner('Lost the connection to the console; retrying…');
  });
}

for (const id of ['search', 'kind-filter', 'state-filter', 'sort']) {
  $(id).addEventListener('input', () => latest && render(latest));
}
$('filters').addEventListener('submit', (event) => event.preventDefault());
connect();
