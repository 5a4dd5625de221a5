'use strict'

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const readline = require('node:readline')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { startRedis } = require('./redis.js')

const fixtures = path.join(__dirname, 'fixtures')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let redis
before(async () => {
  redis = await startRedis()
})
after(async () => {
  await redis?.stop()
})

/** Runs a fixture; resolves to its exit code, or rejects when it runs past `timeoutMs`. */
function run(fixture, args, timeoutMs, nodeArgs = []) {
  const child = spawn(process.execPath, [...nodeArgs, path.join(fixtures, fixture), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${fixture} ${args.join(' ')} did not exit within ${timeoutMs} ms`))
    }, timeoutMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve(code ?? signal)
    })
  })
  return { child, exited }
}

test('child processes exclude each other on a non-atomic GET/SET counter', async () => {
  const name = `node:exclusion:${process.pid}`
  const counter = `node:counter:${process.pid}`
  const processes = 4
  const rounds = 15
  const runs = Array.from({ length: processes }, () =>
    run('counter.js', [redis.url, name, counter, String(rounds)], 120_000).exited)
  assert.deepEqual(await Promise.all(runs), Array(processes).fill(0))
  assert.equal(Number(await redis.command('GET', counter)), processes * rounds, 'no increment was lost')
  assert.equal(await redis.command('EXISTS', name), 0)
})

test('a handle garbage-collected while held is released in the background', async () => {
  const name = `node:gc:${process.pid}`
  const { child, exited } = run('gc-drop.js', [redis.url, name], 60_000, ['--expose-gc'])
  try {
    const lines = readline.createInterface({ input: child.stdout })
    const [first] = await Promise.race([
      new Promise((resolve) => lines.once('line', (line) => resolve([line]))),
      exited.then((code) => [`exited ${code}`]),
    ])
    assert.equal(first, 'held')
    assert.ok((await redis.command('PTTL', name)) > 30_000, 'held with the 60 s lease')
    let released = false
    for (let i = 0; i < 200 && !released; i += 1) {
      released = (await redis.command('EXISTS', name)) === 0
      if (!released) await sleep(100)
    }
    assert.equal(released, true, 'released within 20 s although its lease was 60 s')
    assert.equal(child.exitCode, null, 'released by the live process, not by its exit')
  } finally {
    child.kill('SIGKILL')
    await exited.catch(() => {})
  }
})

for (const mode of ['close', 'keep-open']) {
  test(`the process exits by itself after using a client (${mode})`, async () => {
    const { exited } = run('exit.js', [redis.url, `node:exit:${mode}:${process.pid}`, mode], 20_000)
    assert.equal(await exited, 0)
  })
}

test('a pending acquire alone keeps the process alive until the lock comes', async () => {
  const name = `node:pending:${process.pid}`
  const holder = await Client.connect(redis.url)
  const lock = holder.lock(name)
  assert.equal(await lock.acquire(), true)
  const { child, exited } = run('pending-wait.js', [redis.url, name], 40_000)
  try {
    const lines = readline.createInterface({ input: child.stdout })
    const seen = []
    lines.on('line', (line) => seen.push(line))
    for (let i = 0; i < 100 && !seen.includes('waiting'); i += 1) await sleep(50)
    assert.deepEqual(seen, ['waiting'])
    // Long enough for a process with nothing keeping its loop alive to have exited.
    await sleep(1_000)
    assert.equal(child.exitCode, null, 'the process exited while its acquire was pending')
    await lock.release()
    assert.equal(await exited, 0)
    assert.deepEqual(seen, ['waiting', 'acquired'])
  } finally {
    child.kill('SIGKILL')
    await exited.catch(() => {})
    await holder.close()
  }
})

test('a worker thread ended with a call under way neither crashes nor hangs the process, and the lock that call got is let go', async () => {
  const { child, exited } = run('worker-exit.js', [redis.url, `node:worker:${process.pid}`], 30_000)
  const lines = []
  readline.createInterface({ input: child.stdout }).on('line', (line) => lines.push(line))
  assert.equal(await exited, 0)
  assert.deepEqual(lines, ['done'])
})
