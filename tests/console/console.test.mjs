// polylock console in a real browser: Debian's headless Chromium (/usr/bin/chromium), driven by
// playwright-core, against `polylock console` on a real redis-server, with real holders: the
// core's line-driven `peer` example (Rust, its client named `host:pid`), and Python and Node
// processes of the packages. Writes screenshots of each state of the page, at 1280 and 390 px,
// to target/console-screenshots/ (docs/console/ with CONSOLE_SCREENSHOTS=docs/console).
//
// Needs target/debug/polylock and target/debug/examples/peer, the Python package in
// python/.venv and the Node addon in node/ (`make test-console` builds them all), redis-server,
// and chromium. Run: npm ci && npm test (in tests/console).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TARGET = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target');
const POLYLOCK = process.env.POLYLOCK_BIN || path.join(TARGET, 'debug', 'polylock');
const PEER = process.env.POLYLOCK_PEER_BIN || path.join(TARGET, 'debug', 'examples', 'peer');
const REDIS_SERVER = process.env.POLYLOCK_REDIS_SERVER || 'redis-server';
const PYTHON = process.env.POLYLOCK_PYTHON || path.join(ROOT, 'python', '.venv', 'bin', 'python');
const NODE_PACKAGE = path.join(ROOT, 'node');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// The committed screenshots (docs/console/) are refreshed only when asked
// (`make test-console CONSOLE_SCREENSHOTS=docs/console`): every run has new ports and pids.
const SCREENSHOTS = path.resolve(ROOT, process.env.CONSOLE_SCREENSHOTS || path.join(TARGET, 'console-screenshots'));
// Every wait is bounded by this; the issue's own bound for a hold to show is checked apart.
const BOUND_MS = 20000;
const WIDTHS = { wide: 1280, narrow: 390 };

const children = [];
const scratch = [];

function track(child) {
  children.push(child);
  return child;
}

async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// One command in RESP over a fresh connection; resolves to the first reply line.
function redis(port, ...args) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      reply += chunk;
      if (reply.includes('\r\n')) {
        socket.destroy();
        resolve(reply.split('\r\n')[0]);
      }
    });
    socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')}`);
  });
}

async function until(what, check, bound = BOUND_MS) {
  const deadline = Date.now() + bound;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) return last;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}; last: ${last}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function startRedis() {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'polylock-console-redis-'));
  scratch.push(dir);
  const child = track(spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1',
    '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' }));
  await until('redis-server', async () => (await redis(port, 'PING')) === '+PONG');
  return { port, url: `redis://127.0.0.1:${port}`, child, dir };
}

// A holder process: one polylock client, one command per line.
async function startPeer(url, watchdogMs) {
  const args = watchdogMs ? [url, String(watchdogMs)] : [url];
  const child = track(spawn(PEER, args, { stdio: ['pipe', 'pipe', 'inherit'] }));
  const lines = createInterface({ input: child.stdout });
  const replies = [];
  const waiting = [];
  lines.on('line', (line) => (waiting.length ? waiting.shift()(line) : replies.push(line)));
  const next = () => new Promise((resolve) => (replies.length ? resolve(replies.shift()) : waiting.push(resolve)));
  const ready = await next();
  assert.match(ready, /^ready /);
  return {
    pid: child.pid,
    child,
    // Sends a command; the reply comes when the command is done (an acquire that waits).
    send(command) {
      child.stdin.write(`${command}\n`);
      return next();
    },
  };
}

// A Python or Node process holding (or waiting for, up to 60 s) the plain or fair lock
// `lockName` under the client name `name`; `acquired` resolves to its `held true|false` line.
const HOLDER_SCRIPTS = {
  python: [PYTHON, ['-c', `
import sys, polylock
url, name, kind, lock_name = sys.argv[1:5]
client = polylock.Client(url, name=name)
lock = client.fair_lock(lock_name) if kind == "fair" else client.lock(lock_name)
print("held", str(lock.acquire(timeout=60)).lower(), flush=True)
sys.stdin.read()  # holds until its stdin closes or it is killed
`]],
  node: [process.execPath, ['-e', `
const { Client } = require(process.env.POLYLOCK_NODE_PACKAGE);
const [url, name, kind, lockName] = process.argv.slice(1);
(async () => {
  const client = await Client.connect(url, { name });
  const lock = kind === 'fair' ? client.fairLock(lockName) : client.lock(lockName);
  console.log('held', await lock.acquire({ waitMs: 60000 }));
  process.stdin.resume(); // holds until its stdin closes or it is killed
  process.stdin.on('end', () => process.exit(0));
})();
`]],
};

function startHolder(language, url, name, kind, lockName) {
  const [program, args] = HOLDER_SCRIPTS[language];
  const child = track(spawn(program, [...args, url, name, kind, lockName], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, POLYLOCK_NODE_PACKAGE: NODE_PACKAGE },
  }));
  const acquired = new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${language} holder exited ${code}`)));
  });
  acquired.catch(() => {}); // a holder killed by the test ends this way
  return { pid: child.pid, child, acquired };
}

async function startConsole(url, extra = []) {
  const child = track(spawn(POLYLOCK, ['console', '--redis', url, '--bind', '127.0.0.1:0', ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POLYLOCK_REDIS_URL: '' } }));
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const first = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`console exited ${code}: ${stderr}`)));
  });
  const match = first.match(/^polylock console: (http:\/\/\S+\/)$/);
  assert.ok(match, first);
  return { base: match[1], child, stderr: () => stderr };
}

let browser;

before(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const userDataDir = mkdtempSync(path.join(tmpdir(), 'polylock-console-chromium-'));
  scratch.push(userDataDir);
  browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
    viewport: { width: WIDTHS.wide, height: 900 },
  });
});

after(async () => {
  await browser?.close();
  for (const child of children) child.kill('SIGKILL');
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

async function shoot(page, name) {
  for (const [label, width] of Object.entries(WIDTHS)) {
    await page.setViewportSize({ width, height: 900 });
    // Nothing wider than the window: the page reflows instead of scrolling sideways.
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${name} at ${width} px is ${overflow} px too wide`);
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-${label}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: WIDTHS.wide, height: 900 });
}

const row = (page, name) => page.locator(`#locks tbody tr[data-name="${name}"]`);

test('a hold appears with the holder\'s name and pid; a fair queue in order; read-only refuses', async () => {
  const server = await startRedis();
  const holder = await startPeer(server.url);
  const console_ = await startConsole(server.url);
  const page = await browser.newPage();
  await page.goto(console_.base);

  const started = Date.now();
  assert.equal(await holder.send('acquire orders:42 0 -'), 'ok true');
  await until('orders:42 with its holder\'s pid', async () =>
    (await row(page, 'orders:42').textContent({ timeout: 500 })).includes(`pid ${holder.pid}`));
  const shownAfter = Date.now() - started;
  console.log(`# the hold showed after ${shownAfter} ms (the issue asks for 2 s)`);
  const holders = await row(page, 'orders:42').locator('td[data-label="Holders"]').textContent();
  assert.match(holders, new RegExp(`:${holder.pid} \\(pid ${holder.pid} on `));

  // A fair lock: held by one peer, two more queued in order.
  const [first, second] = [await startPeer(server.url), await startPeer(server.url)];
  assert.equal(await holder.send('fair_acquire queue:fair 0 -'), 'ok true');
  first.send('fair_acquire queue:fair 60000 -');
  await until('the first waiter queued', async () => (await redis(server.port, 'LLEN', 'redisson_lock_queue:{queue:fair}')) === ':1');
  second.send('fair_acquire queue:fair 60000 -');
  await until('the second waiter queued', async () => (await redis(server.port, 'LLEN', 'redisson_lock_queue:{queue:fair}')) === ':2');
  const waiters = row(page, 'queue:fair').locator('ol.waiters li');
  const order = await until('both waiters named', async () => {
    const texts = await waiters.allTextContents();
    return texts.length === 2 && texts.every((t) => t.includes('pid ')) && texts;
  });
  assert.ok(order[0].includes(`pid ${first.pid}`) && order[1].includes(`pid ${second.pid}`), order.join(' | '));
  // The clients table: the holder holds both locks, each waiter waits in its place.
  const clientRows = () => page.locator('#clients tbody tr').evaluateAll((rows) => Object.fromEntries(
    rows.map((r) => [r.querySelector('[data-label="Pid"]').textContent,
      [r.querySelector('[data-label="Holds"]').textContent, r.querySelector('[data-label="Waits for"]').textContent]])));
  const clients = await until('the clients\' holds and waits', async () => {
    const rows = await clientRows();
    return rows[holder.pid]?.[0].includes('queue:fair') && rows[second.pid]?.[1] !== '–' && rows;
  });
  assert.deepEqual(clients[holder.pid], ['orders:42, queue:fair', '–']);
  assert.equal(clients[first.pid][1], 'queue:fair (1st in line)');
  assert.equal(clients[second.pid][1], 'queue:fair (2nd in line)');

  // Read-only: no button, and the API refuses.
  assert.equal(await page.locator('button', { hasText: 'Force-unlock' }).count(), 0);
  const refused = await page.evaluate(async () => {
    const response = await fetch('/api/force-unlock', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'orders:42', holder: 'x:1' }),
    });
    return response.status;
  });
  assert.equal(refused, 403);
  assert.equal(await redis(server.port, 'EXISTS', 'orders:42'), ':1');

  // The filters: contended leaves the fair lock only; the search finds by name.
  await page.selectOption('#state-filter', 'contended');
  assert.deepEqual(await page.locator('#locks tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.name)), ['queue:fair']);
  await page.selectOption('#state-filter', '');
  const names = () => page.locator('#locks tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.name));
  await page.selectOption('#sort', 'waiters');
  assert.deepEqual(await names(), ['queue:fair', 'orders:42']);
  await page.selectOption('#sort', 'name');
  assert.deepEqual(await names(), ['orders:42', 'queue:fair']);
  await shoot(page, 'locks');

  await page.close();
  // The waiters still wait: their acquires end with their processes.
  for (const peer of [first, second]) peer.child.kill('SIGKILL');
});

test('holders in Rust, Python and Node processes, named, and a fair queue across them in order', async () => {
  const server = await startRedis();
  const console_ = await startConsole(server.url);
  const page = await browser.newPage();
  await page.goto(console_.base);
  const python = startHolder('python', server.url, 'python-holder', 'lock', 'lang:python');
  const node = startHolder('node', server.url, 'node-holder', 'lock', 'lang:node');
  assert.equal(await python.acquired, 'held true');
  assert.equal(await node.acquired, 'held true');
  for (const [lock, holder, name] of [['lang:python', python, 'python-holder'], ['lang:node', node, 'node-holder']]) {
    await until(`${lock} held by ${name}`, async () =>
      (await row(page, lock).textContent({ timeout: 500 })).includes(`${name} (pid ${holder.pid} on `));
  }
  // A fair lock held by the Rust peer; the Python process queued first, the Node one second.
  const rust = await startPeer(server.url);
  assert.equal(await rust.send('fair_acquire lang:fair 0 -'), 'ok true');
  const queue = 'redisson_lock_queue:{lang:fair}';
  const pythonWaits = startHolder('python', server.url, 'python-waiter', 'fair', 'lang:fair');
  await until('the Python waiter queued', async () => (await redis(server.port, 'LLEN', queue)) === ':1');
  const nodeWaits = startHolder('node', server.url, 'node-waiter', 'fair', 'lang:fair');
  await until('the Node waiter queued', async () => (await redis(server.port, 'LLEN', queue)) === ':2');
  const order = await until('both waiters named', async () => {
    const texts = await row(page, 'lang:fair').locator('ol.waiters li').allTextContents();
    return texts.length === 2 && texts.every((t) => t.includes('pid ')) && texts;
  });
  assert.deepEqual(order, [`python-waiter (pid ${pythonWaits.pid} on ${order[0].split(' on ')[1]}`,
    `node-waiter (pid ${nodeWaits.pid} on ${order[1].split(' on ')[1]}`]);
  assert.match(await row(page, 'lang:fair').locator('td[data-label="Holders"]').textContent(),
    new RegExp(`\\(pid ${rust.pid} on `));
  await shoot(page, 'languages');
  await page.close();
});

test('force-unlock with --allow-write and the token wakes the next waiter; a wrong token gets 401', async () => {
  const server = await startRedis();
  const [holder, waiter] = [await startPeer(server.url), await startPeer(server.url)];
  assert.equal(await holder.send('fair_acquire orders:9 0 -'), 'ok true');
  const waiterGets = waiter.send('fair_acquire orders:9 60000 -');
  await until('the waiter queued', async () => (await redis(server.port, 'LLEN', 'redisson_lock_queue:{orders:9}')) === ':1');
  const token = 'browser-test-token';
  const console_ = await startConsole(server.url, ['--allow-write', '--token', token]);

  // Without the token, or with a wrong one: 401 and nothing about the locks.
  const page = await browser.newPage();
  for (const address of [console_.base, `${console_.base}?token=wrong`, `${console_.base}api/snapshot?token=wrong`]) {
    const response = await page.goto(address);
    assert.equal(response.status(), 401, address);
    const body = await response.text();
    assert.ok(!body.includes('orders:9'), body);
  }

  await page.goto(`${console_.base}?token=${token}`);
  const button = row(page, 'orders:9').getByRole('button', { name: /Force-unlock/ });
  await until('the holder named, with its button', async () =>
    (await row(page, 'orders:9').textContent({ timeout: 500 })).includes(`pid ${holder.pid}`)
    && (await button.count()) === 1);
  let question = '';
  page.once('dialog', async (dialog) => {
    question = dialog.message();
    await dialog.accept();
  });
  // By keyboard: the button takes the focus and Enter presses it.
  await button.focus();
  await page.keyboard.press('Enter');
  await until('the answer', async () => (await page.locator('#action-status').textContent()).startsWith('Done:'));
  assert.ok(question.includes('orders:9') && question.includes(`pid ${holder.pid}`), question);
  assert.equal(await waiterGets, 'ok true');
  await until('the waiter shown as the holder', async () =>
    (await row(page, 'orders:9').textContent({ timeout: 500 })).includes(`pid ${waiter.pid}`));
  await until('the force-unlock on the timeline', async () =>
    (await page.locator('#timeline li.force-unlock').count()) === 1);
  assert.match(console_.stderr(), /force-unlocked fair lock 'orders:9' held by /);
  await shoot(page, 'write');

  // Redis gone: a banner, the page still there; back: the banner goes.
  server.child.kill('SIGKILL');
  await until('the banner', async () => page.locator('#banner').isVisible());
  assert.match(await page.locator('#banner').textContent(), /Redis is not answering/);
  await shoot(page, 'banner');
  await page.close();
});

test('a SIGKILLed holder\'s lease running out is a loss on the timeline', async () => {
  const server = await startRedis();
  const console_ = await startConsole(server.url);
  const page = await browser.newPage();
  await page.goto(console_.base);
  // A 2 s watchdog lease: once the process is gone, nobody renews it.
  const holder = await startPeer(server.url, 2000);
  assert.equal(await holder.send('acquire jobs:crash 0 -'), 'ok true');
  await until('jobs:crash with its holder', async () =>
    (await row(page, 'jobs:crash').textContent({ timeout: 500 })).includes(`pid ${holder.pid}`));
  holder.child.kill('SIGKILL');
  const loss = page.locator('#timeline li.lease-ran-out');
  await until('the loss on the timeline', async () => (await loss.count()) === 1);
  const text = await loss.textContent();
  assert.ok(text.includes('jobs:crash') && text.includes(`pid ${holder.pid}`), text);
  // The row goes too, though not always at the same refresh: the killed holder's client record
  // lapses with its lease too, up to a third of it after the lock, and an acquire in its last
  // window still reads as use of the (free) lock until then.
  await until('jobs:crash gone from the list', async () => (await row(page, 'jobs:crash').count()) === 0);
  await shoot(page, 'timeline');
  await page.close();
});

test('a lock acquired over and over has a rate and sparklines; sorting by rate puts it first', async () => {
  const server = await startRedis();
  // The busy peer's counter (a string key, which reads as a semaphore) is outside the pattern.
  const console_ = await startConsole(server.url, ['--pattern', 'lock:*']);
  const page = await browser.newPage();
  await page.goto(console_.base);
  // A quiet held lock, named before the busy one: sorted by name it comes first.
  const quiet = await startPeer(server.url);
  assert.equal(await quiet.send('acquire lock:a-quiet 0 -'), 'ok true');
  // A 3 s watchdog: the busy peer's record (and its counters) is rewritten every second.
  const busy = await startPeer(server.url, 3000);
  let running = true;
  const churn = (async () => {
    while (running) assert.equal(await busy.send('increment lock:b-busy counter:busy 20'), 'ok');
  })();
  const activity = row(page, 'lock:b-busy').locator('td[data-label="Activity"]');
  const acquires = activity.locator('[data-measure="acquires/s"]');
  await until('lock:b-busy with acquires/s above 0 and a sparkline line', async () => {
    const value = Number(await acquires.locator('.measure-value').textContent({ timeout: 500 }));
    return value > 0 && (await acquires.locator('svg.sparkline polyline').count()) === 1;
  });
  // The line grows a point per reading.
  await until('three readings on the acquires/s line', async () =>
    (await acquires.locator('svg.sparkline polyline').getAttribute('points')).split(' ').length >= 3);
  // Four sparklines, each an image named for screen readers.
  assert.equal(await activity.locator('svg.sparkline[role="img"]').count(), 4);
  assert.match(await acquires.locator('svg').getAttribute('aria-label'), /^acquires\/s over the last \d+ readings, now /);
  const names = () => page.locator('#locks tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.name));
  assert.deepEqual(await names(), ['lock:a-quiet', 'lock:b-busy']);
  await page.selectOption('#sort', 'rate');
  assert.deepEqual(await names(), ['lock:b-busy', 'lock:a-quiet']);
  await shoot(page, 'activity');
  running = false;
  await churn;
  await page.close();
});

// The WCAG contrast ratio of the text of the first node of each selector on its background.
function contrastRatios(page, probes) {
  return page.evaluate((selectors) => {
    const rgb = (text) => text.match(/\d+(\.\d+)?/g).slice(0, 3).map(Number);
    const luminance = ([r, g, b]) => {
      const [lr, lg, lb] = [r, g, b].map((v) => {
        const c = v / 255;
        return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * lr + 0.7152 * lg + 0.0722 * lb;
    };
    const ratio = (a, b) => {
      const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
      return (x + 0.05) / (y + 0.05);
    };
    const background = (node) => {
      for (let n = node; n; n = n.parentElement) {
        const color = getComputedStyle(n).backgroundColor;
        if (!color.startsWith('rgba(0, 0, 0, 0)')) return rgb(color);
      }
      return [255, 255, 255];
    };
    return selectors.map((selector) => {
      const node = document.querySelector(selector);
      if (!node) return [selector, 0];
      // SVG text is painted with `fill`, HTML text with `color`.
      const paint = node instanceof SVGElement ? getComputedStyle(node).fill : getComputedStyle(node).color;
      return [selector, ratio(rgb(paint), background(node))];
    });
  }, probes);
}

function assertContrast(ratios) {
  for (const [selector, ratio] of ratios) {
    assert.ok(ratio >= 4.5, `${selector}: contrast ${ratio.toFixed(2)} < 4.5`);
  }
}

test('the page\'s text and buttons pass the WCAG AA contrast ratio', async () => {
  const server = await startRedis();
  // A Redisson-style hold, so that a force-unlock button is on the page.
  assert.equal(await redis(server.port, 'HSET', 'orders:1', '7b1e2d3c-0000-4000-8000-000000000001:57', '1'), ':1');
  assert.equal(await redis(server.port, 'PEXPIRE', 'orders:1', '600000'), ':1');
  const console_ = await startConsole(server.url, ['--allow-write']);
  const page = await browser.newPage();
  await page.goto(console_.base);
  await until('the force-unlock button', async () => (await page.locator('#locks button').count()) === 1);
  await page.evaluate(() => {
    const banner = document.getElementById('banner');
    banner.hidden = false;
    banner.textContent = 'sample';
  });
  assertContrast(await contrastRatios(page, ['h1', '#source', 'th', 'td', 'td.name a', '#locks button', '#no-events', 'label', '#banner']));
  await page.close();
});

const lockPageOf = (base, name) => `${base}#/lock/${encodeURIComponent(name)}`;

test('a lock\'s page: a hold by a real holder with its duration, a fair queue in order that moves, by keyboard', async () => {
  const server = await startRedis();
  const console_ = await startConsole(server.url);
  const page = await browser.newPage();
  await page.goto(console_.base);
  const holder = await startPeer(server.url);
  assert.equal(await holder.send('fair_acquire page:fair 0 -'), 'ok true');
  const [first, second] = [await startPeer(server.url), await startPeer(server.url)];
  const queue = 'redisson_lock_queue:{page:fair}';
  const firstGets = first.send('fair_acquire page:fair 60000 -');
  await until('the first waiter queued', async () => (await redis(server.port, 'LLEN', queue)) === ':1');
  second.send('fair_acquire page:fair 60000 -');
  await until('the second waiter queued', async () => (await redis(server.port, 'LLEN', queue)) === ':2');

  // By keyboard: the name's link takes the focus, Enter opens the page.
  await until('page:fair listed', async () => (await row(page, 'page:fair').count()) === 1);
  await row(page, 'page:fair').locator('td.name a').focus();
  await page.keyboard.press('Enter');
  await until('the lock\'s page', async () => page.locator('#lock-view').isVisible());
  assert.equal(new URL(page.url()).hash, '#/lock/page%3Afair');
  assert.equal(await page.locator('#overview').isVisible(), false);
  assert.equal(await page.locator('#lock-name').textContent(), 'page:fair');

  const holdRows = page.locator('#holds tbody tr');
  await until('the hold, with its holder\'s pid, held now', async () => {
    const text = await holdRows.first().textContent({ timeout: 500 });
    return text.includes(`pid ${holder.pid}`) && text.includes('held now');
  });
  const latestOrder = () => page.locator('#queue-orders tbody tr').first().locator('li').allTextContents();
  const order = await until('both waiters in order', async () => {
    const texts = await latestOrder();
    return texts.length === 2 && texts.every((t) => t.includes('pid ')) && texts;
  });
  assert.ok(order[0].includes(`pid ${first.pid}`) && order[1].includes(`pid ${second.pid}`), order.join(' | '));
  // The hold grows while held.
  const heldFor = () => holdRows.first().locator('td[data-label="Held for"]').textContent();
  const before = parseFloat(await heldFor());
  await until('the hold\'s duration growing', async () => parseFloat(await heldFor()) > before);
  await shoot(page, 'lock-page');

  // The head takes the lock: the second waiter moves up, the first order stays below.
  assert.equal(await holder.send('fair_release page:fair'), 'ok');
  assert.equal(await firstGets, 'ok true');
  await until('the second waiter at the head', async () => {
    const texts = await latestOrder();
    return texts.length === 1 && texts[0].includes(`pid ${second.pid}`);
  });
  const earlier = await page.locator('#queue-orders tbody tr').nth(1).locator('li').allTextContents();
  assert.equal(earlier.length, 2, earlier.join(' | '));
  const holds = await until('the first waiter\'s hold and the ended one', async () => {
    const texts = await holdRows.allTextContents();
    return texts.length === 2 && texts;
  });
  assert.ok(holds[0].includes(`pid ${first.pid}`) && holds[0].includes('held now'), holds[0]);
  assert.ok(holds[1].includes(`pid ${holder.pid}`) && !holds[1].includes('held now'), holds[1]);
  assertContrast(await contrastRatios(page, ['#lock-title', '#lock-summary', '#back', '#holds th', '#holds td', '.held', '.ongoing', '.owner']));

  // Back, and the keyboard is on the lock's link again.
  await page.locator('#back').focus();
  await page.keyboard.press('Enter');
  await until('the overview', async () => page.locator('#overview').isVisible());
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'page:fair');

  // A name with nothing at it, and one with characters HTML and URLs treat apart.
  await page.goto(lockPageOf(console_.base, 'nothing:here'));
  await until('nothing at this name', async () =>
    (await page.locator('#lock-missing').isVisible()) && (await page.locator('#lock-missing').textContent()).startsWith('Nothing at this name'));
  const odd = '<img src=x onerror="window.pwned=1"> & #/lock/%zz';
  assert.equal(await holder.send(`acquire ${odd.replaceAll(' ', '_')} 0 -`), 'ok true');
  const oddName = odd.replaceAll(' ', '_');
  await page.goto(console_.base);
  await until('the odd name listed', async () => (await page.locator('#locks td.name a').allTextContents()).includes(oddName));
  await page.locator('#locks td.name a', { hasText: oddName }).click();
  await until('its page, named as given', async () => (await page.locator('#lock-name').textContent()) === oddName
    && (await page.locator('#holds tbody tr').count()) === 1);
  assert.equal(await page.evaluate(() => document.querySelectorAll('img').length), 0);
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  await page.close();
  second.child.kill('SIGKILL');
});

test('an election\'s page: its leader, value and term, and the next term on the page and the timeline', async () => {
  const server = await startRedis();
  const console_ = await startConsole(server.url);
  const page = await browser.newPage();
  const [leader, next] = [await startPeer(server.url), await startPeer(server.url)];
  const term = Number((await leader.send('elect_campaign leader:db 10.0.0.1:5432 0')).split(' ')[1]);
  assert.ok(term >= 1);
  await page.goto(lockPageOf(console_.base, 'leader:db'));
  await until('the leader named', async () =>
    (await page.locator('#leader').textContent({ timeout: 500 })).includes(`pid ${leader.pid}`));
  assert.equal(await page.locator('#leader-value').textContent(), '10.0.0.1:5432');
  assert.equal(await page.locator('#leader-term').textContent(), String(term));
  assert.equal(await page.locator('#lock-kind').textContent(), 'election');

  const nextGets = next.send('elect_campaign leader:db 10.0.0.2:5432 20000');
  assert.equal(await leader.send('elect_resign leader:db'), 'ok');
  const nextTerm = Number((await nextGets).split(' ')[1]);
  assert.ok(nextTerm > term);
  await until('the next leader and term', async () =>
    (await page.locator('#leader-term').textContent()) === String(nextTerm)
    && (await page.locator('#leader').textContent()).includes(`pid ${next.pid}`));
  assert.equal(await page.locator('#leader-value').textContent(), '10.0.0.2:5432');
  const terms = await page.locator('#terms li').allTextContents();
  assert.ok(terms[0].startsWith(`term ${nextTerm}: `) && terms[1].startsWith(`term ${term}: `), terms.join(' | '));
  await shoot(page, 'election-page');

  // The listing offers the kind, and the timeline tells the new term.
  await page.goto(console_.base);
  await page.selectOption('#kind-filter', 'election');
  await until('only the election', async () =>
    JSON.stringify(await page.locator('#locks tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.name))) === '["leader:db"]');
  await until('the new leader on the timeline', async () =>
    (await page.locator('#timeline li.new-leader').allTextContents()).some((t) => t.includes(`term ${nextTerm}`)));
  await page.close();
});
