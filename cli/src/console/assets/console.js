// polylock console: renders the snapshots the server pushes (GET /api/events), a lock's page
// (#/lock/<name>: GET /api/lock/events) and, when the console allows writes, asks it to
// force-unlock. Everything shown is set as text (lock names and client names come from Redis,
// so they are never parsed as HTML), and names go into addresses URI-encoded.
'use strict';

const token = new URLSearchParams(location.search).get('token');
const STUCK_MS = 60000;
let latest = null;

const $ = (id) => document.getElementById(id);

// `path` with its query: `params` and the token, each URI-encoded.
function withToken(path, params = {}) {
  const query = new URLSearchParams(params);
  if (token) query.set('token', token);
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

// The address of a lock's page (the token stays in the page's own query).
function lockHref(name) {
  return `#/lock/${encodeURIComponent(name)}`;
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
    const counter = lock.kind.includes('semaphore') || lock.kind === 'latch';
    box.append(element('span', counter ? '–' : lock.kind === 'election' ? 'nobody leads' : 'free'));
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
    if (lock.leader && lock.leader.owner === holder.owner) {
      line.append(` leads, term ${lock.leader.term}, value '${lock.leader.value}'`);
    }
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
  if (lock.latch_count != null) parts.push(`count ${lock.latch_count}`);
  if (lock.fence_token != null) parts.push(`${lock.kind === 'election' ? 'term' : 'token'} ${lock.fence_token}`);
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
    // The name is the link to the lock's page (Tab and Enter); a click anywhere on the row
    // opens it too.
    const link = element('a', lock.name);
    link.href = lockHref(lock.name);
    link.dataset.focusKey = `open ${lock.name}`;
    const nameCell = cell(row, 'Name', link, 'name');
    row.addEventListener('click', (event) => {
      if (!event.target.closest('a, button') && !window.getSelection().toString()) location.hash = lockHref(lock.name);
    });
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

// The lock's page: which name is open, its event stream, and its latest page.
const lockView = { name: null, events: null, page: null };

// `#/lock/<name>`: the name, URI-decoded; `undefined` for an address that is not a lock's page,
// `null` for one whose name cannot be decoded.
function routedName() {
  const match = location.hash.match(/^#\/lock\/(.*)$/);
  if (!match) return undefined;
  try {
    return decodeURIComponent(match[1]);
  } catch (err) {
    return null;
  }
}

function route() {
  const name = routedName();
  if (name === lockView.name && name !== undefined) return;
  if (lockView.events) lockView.events.close();
  const left = lockView.name;
  Object.assign(lockView, { name, events: null, page: null });
  const onPage = name !== undefined;
  $('overview').hidden = onPage;
  $('lock-view').hidden = !onPage;
  if (!onPage) {
    document.title = 'polylock console';
    if (latest) render(latest);
    // Back from a lock's page: the keyboard goes back to that lock's link.
    const back = Array.from(document.querySelectorAll('#locks a[data-focus-key]'))
      .find((node) => node.dataset.focusKey === `open ${left}`);
    if (back) back.focus();
    return;
  }
  document.title = `${name || 'lock'} · polylock console`;
  $('lock-name').textContent = name || '';
  $('lock-kind').textContent = '';
  $('lock-summary').textContent = name === null ? '' : 'Reading…';
  for (const id of ['election', 'lock-missing']) $(id).hidden = true;
  for (const id of ['holds', 'queue-orders']) $(id).querySelector('tbody').replaceChildren();
  $('wait-histogram').replaceChildren();
  $('lock-title').focus();
  if (name === null || name === '') {
    showMissing('This address names no lock: the name after #/lock/ is empty or not URI-encoded.');
    return;
  }
  const events = new EventSource(withToken('/api/lock/events', { name }));
  lockView.events = events;
  events.addEventListener('lock', (event) => {
    if (lockView.events !== events) return;
    lockView.page = JSON.parse(event.data);
    renderLockPage(lockView.page);
  });
  events.addEventListener('error', async () => {
    // EventSource does not say why: ask once (a refused name, too many pages, no token).
    try {
      const response = await fetch(withToken('/api/lock', { name }));
      if (!response.ok) {
        events.close();
        const answer = await response.json().catch(() => ({ message: `HTTP ${response.status}` }));
        $('lock-summary').textContent = `This page cannot be shown: ${answer.message || response.status}`;
      }
    } catch (err) {
      // the console itself is gone: EventSource keeps retrying
    }
  });
}

function showMissing(text) {
  const missing = $('lock-missing');
  missing.hidden = false;
  missing.textContent = text;
}

function ordinalPlace(waiters) {
  const list = element('ol', null, 'waiters');
  for (const waiter of waiters) list.append(element('li', who(waiter)));
  return list;
}

function holdRows(page) {
  return page.holds.slice().reverse().map((hold) => {
    const row = element('tr');
    const holder = element('div');
    let text = who(hold);
    if (hold.mode) text += ` (${hold.mode})`;
    holder.append(element('span', text, 'held'));
    if (hold.client_name) holder.append(' ', element('span', hold.owner, 'owner'));
    cell(row, 'Holder', holder);
    cell(row, 'Start', clock(hold.start_ms));
    cell(row, 'End', hold.end_ms == null ? element('span', 'held now', 'ongoing') : clock(hold.end_ms));
    cell(row, 'Held for', age(Math.max(0, hold.duration_ms)));
    return row;
  });
}

function queueRows(page) {
  return page.queue_orders.slice().reverse().map((order) => {
    const row = element('tr');
    const seen = order.since_ms === order.until_ms
      ? clock(order.since_ms) : `${clock(order.since_ms)} – ${clock(order.until_ms)}`;
    cell(row, 'Seen', seen);
    cell(row, 'Waiters', order.waiters.length ? ordinalPlace(order.waiters) : 'nobody waits');
    return row;
  });
}

function boundText(ms) {
  return ms < 1000 ? `${ms} ms` : `${ms / 1000} s`;
}

// Bars of the wait histogram (inline SVG): one per bucket, its count above it, a bound under
// every other one.
function histogramChart(histogram) {
  const width = 480;
  const height = 140;
  const bars = histogram.counts.length;
  const step = width / bars;
  const top = Math.max(...histogram.counts, 1);
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'histogram');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('role', 'img');
  const described = histogram.counts
    .map((count, i) => (count ? `${count} ${i < histogram.bounds_ms.length ? `up to ${boundText(histogram.bounds_ms[i])}` : `over ${boundText(histogram.bounds_ms[i - 1])}`}` : null))
    .filter(Boolean)
    .join(', ');
  svg.setAttribute('aria-label', `Wait times: ${described || 'no wait counted'}`);
  const add = (tag, attributes, text) => {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    if (text != null) node.textContent = text;
    svg.append(node);
    return node;
  };
  const floor = height - 28;
  add('line', { class: 'base', x1: 0, x2: width, y1: floor + 0.5, y2: floor + 0.5 });
  histogram.counts.forEach((count, i) => {
    const barHeight = (count / top) * (floor - 14);
    const x = i * step + 1.5;
    const bar = add('rect', { x, y: floor - barHeight, width: step - 3, height: barHeight });
    bar.dataset.count = count;
    if (count) add('text', { x: x + (step - 3) / 2, y: floor - barHeight - 3, 'text-anchor': 'middle' }, count);
    if (i % 3 === 0 || i === bars - 1) {
      const label = i < histogram.bounds_ms.length ? `≤${boundText(histogram.bounds_ms[i])}` : `>${boundText(histogram.bounds_ms[i - 1])}`;
      // The end labels stay inside the chart: the first from its left edge, the last to its right.
      const [anchor, at] = i === 0 ? ['start', 0] : i === bars - 1 ? ['end', width] : ['middle', x + (step - 3) / 2];
      add('text', { x: at, y: floor + 13 + (i % 2) * 12, 'text-anchor': anchor }, label);
    }
  });
  return svg;
}

function renderElection(page, state) {
  const box = $('election');
  box.hidden = state.kind !== 'election';
  if (box.hidden) return;
  const leader = state.leader;
  $('leader').textContent = leader
    ? `${who(leader)}${leader.client_name ? '' : leader.announced_by ? ` (announced as ${leader.announced_by})` : ''}`
    : 'nobody leads now';
  $('leader-value').textContent = leader ? leader.value : '–';
  $('leader-term').textContent = leader ? String(leader.term)
    : state.fence_token != null ? `none now (the last term given: ${state.fence_token})` : '–';
  const terms = page.terms.slice().reverse().map((term) => element('li',
    `term ${term.term}: ${who(term)}, value '${term.value}', first seen ${clock(term.seen_ms)}`));
  $('terms').replaceChildren(...terms);
  if (terms.length === 0) $('terms').append(element('li', 'no leader seen yet'));
}

function lockSummary(page, state) {
  const parts = [];
  if (state.kind === 'latch') parts.push(`count ${state.latch_count}`);
  else if (state.kind.includes('semaphore')) parts.push(permitsText(state));
  else if (state.holders.length) {
    parts.push(`held by ${state.holders.map(who).join(', ')}`);
    parts.push(`lease left ${leaseText({ ...state, held: true })}`);
  } else parts.push('free');
  const waiters = waitersOf(state);
  if (waiters.length) parts.push(`${waiters.length} waiting`);
  parts.push(`read at ${clock(page.read_ms)}`);
  return parts.join(' · ');
}

function renderLockPage(page) {
  if (page.name !== lockView.name) return;
  const state = page.state;
  const problem = page.redis_error || page.error;
  if (!state) {
    $('lock-summary').textContent = problem ? `Cannot read it: ${problem}` : 'Reading…';
    return;
  }
  $('lock-kind').textContent = page.found ? state.kind : '';
  $('lock-summary').textContent = (problem ? `Cannot read it now (${problem}); as last read: ` : '') + lockSummary(page, state);
  $('lock-missing').hidden = page.found;
  if (!page.found) {
    showMissing('Nothing at this name: no lock, queue, count or election is kept under it now. The page keeps reading it and shows what comes.');
  }
  renderElection(page, state);
  const holds = holdRows(page);
  $('holds').querySelector('tbody').replaceChildren(...holds);
  $('holds').hidden = holds.length === 0;
  $('no-holds').hidden = holds.length > 0;
  const orders = queueRows(page);
  $('queue-orders').querySelector('tbody').replaceChildren(...orders);
  $('queue-orders').hidden = orders.length === 0;
  $('no-queue').hidden = orders.length > 0;
  const histogram = page.wait_histogram;
  const chart = $('wait-histogram');
  if (histogram) {
    const average = histogram.count ? ` (average ${(histogram.sum_ms / histogram.count).toFixed(1)} ms)` : '';
    const summary = element('p', `${histogram.count} wait(s) from ${histogram.clients} client(s)${average}`);
    chart.replaceChildren(summary, histogramChart(histogram));
  } else {
    chart.replaceChildren();
  }
  $('no-histogram').hidden = Boolean(histogram);
}

window.addEventListener('hashchange', route);

for (const id of ['search', 'kind-filter', 'state-filter', 'sort']) {
  $(id).addEventListener('input', () => latest && render(latest));
}
$('filters').addEventListener('submit', (event) => event.preventDefault());
connect();
route();
