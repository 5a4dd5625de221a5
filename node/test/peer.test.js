'use strict'

// Cross-language: a Rust holder (core/examples/peer.rs) and this package exclude each other.

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { startRedis } = require('./redis.js')

const peerBinary = process.env.POLYLOCK_PEER ?? path.join(__dirname, '..', '..', 'target', 'debug', 'examples', 'peer')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The peer process: `send(line)` resolves to its reply line. */
class Peer {
  constructor(url) {
    this.child = spawn(peerBinary, [url], { stdio: ['pipe', 'pipe', 'inherit'] })
    this.replies = []
    this.waiting = []
    readline.createInterface({ input: this.child.stdout }).on('line', (line) => {
      const next = this.waiting.shift()
      if (next) next(line)
      else this.replies.push(line)
    })
  }

  next() {
    if (this.replies.length > 0) return Promise.resolve(this.replies.shift())
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('peer: no reply within 20 s')), 20_000)
      this.waiting.push((line) => {
        clearTimeout(timer)
        resolve(line)
      })
    })
  }

  send(line) {
    this.child.stdin.write(`${line}\n`)
    return this.next()
  }

  async stop() {
    this.child.stdin.end('quit\n')
    if (this.child.exitCode === null) this.child.kill('SIGKILL')
  }
}

let redis
let client
let peer
before(async () => {
  assert.ok(fs.existsSync(peerBinary), `${peerBinary} is missing: run \`cargo build --example peer\` first`)
  redis = await startRedis()
  client = await Client.connect(redis.url)
  peer = new Peer(redis.url)
  assert.match(await peer.next(), /^ready /)
})
after(async () => {
  await peer?.stop()
  await client?.close()
  await redis?.stop()
})

test('a Rust holder excludes Node, and its release wakes a Node waiter long before its lease', async () => {
  const name = `cross:rust-holds:${process.pid}`
  assert.equal(await peer.send(`acquire ${name} 0 60000`), 'ok true')
  const lock = client.lock(name)
  assert.equal(await lock.acquire({ waitMs: 0 }), false)
  const started = Date.now()
  const waiting = lock.acquire({ waitMs: 50_000 })
  await sleep(200)
  assert.equal(await peer.send(`release ${name}`), 'ok')
  assert.equal(await waiting, true)
  assert.ok(Date.now() - started < 20_000, 'woken far sooner than the 60 s lease')
  await lock.release()
})

test('a Node holder excludes the Rust peer until it releases', async () => {
  const name = `cross:node-holds:${process.pid}`
  const lock = client.lock(name)
  assert.equal(await lock.acquire(), true)
  assert.equal(await peer.send(`acquire ${name} 0 -`), 'ok false')
  assert.equal(await peer.send(`is_locked ${name}`), 'ok true')
  await lock.release()
  assert.equal(await peer.send(`acquire ${name} 0 -`), 'ok true')
  assert.equal(await lock.acquire({ waitMs: 0 }), false)
  assert.equal(await peer.send(`release ${name}`), 'ok')
  assert.equal(await lock.isLocked(), false)
})

test('a Rust peer and Node increment one non-atomic counter under the lock without losing one', async () => {
  const name = `cross:counter:${process.pid}`
  const counter = `cross:counter-value:${process.pid}`
  const rounds = 30
  const rust = peer.send(`increment ${name} ${counter} ${rounds}`)
  for (let round = 0; round < rounds; round += 1) {
    await client.lock(name).using(async () => {
      const value = Number((await redis.command('GET', counter)) ?? 0)
      await sleep(2)
      await redis.command('SET', counter, String(value + 1))
    })
  }
  assert.equal(await rust, 'ok')
  assert.equal(Number(await redis.command('GET', counter)), 2 * rounds)
})
