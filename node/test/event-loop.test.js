'use strict'

// The hot path's I/O on the event loop (node/src/event_loop.rs, core/src/connection/loop_link.rs):
// a client of one plain server sends the commands of its calls on a connection of its own that
// the event loop reads, not on the core's connection; that connection's failures hand the calls
// to the core's until it is opened again, a value larger than the socket takes at once still goes out whole, a password
// and a database are set on it, and close() closes it.

const assert = require('node:assert/strict')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { FaultProxy } = require('./faults.js')
const { connectRedis, freshNames, startRedis, waitFor, NotYet } = require('./redis.js')

let redis
before(async () => {
  redis = await startRedis()
  assert.equal(await redis.command('ACL', 'SETUSER', 'loop_node', 'on', '>sesame', '~*', '&*', '+@all'), 'OK')
})
after(async () => {
  await redis?.stop()
})
const fresh = freshNames('loop')

/** A connection as the default user. */
function admin() {
  return connectRedis(redis.port)
}

/** polylock's URL for the user `loop_node`, through `port` (the server's by default). */
function userUrl(port = redis.port, db = '') {
  return `redis://loop_node:sesame@127.0.0.1:${port}${db}`
}

/** The `user` of the client connection at `addr`. */
async function userAt(connection, addr) {
  const list = /** @type {string} */ (await connection.call('CLIENT', 'LIST'))
  const line = list.split('\n').find((entry) => entry.includes(`addr=${addr} `))
  return line && /user=(\S+)/.exec(line)[1]
}

/** The `addr` of every client connection now. */
async function addresses(connection) {
  const list = /** @type {string} */ (await connection.call('CLIENT', 'LIST'))
  return list.split('\n').filter(Boolean).map((line) => /addr=(\S+)/.exec(line)[1])
}

/** Collects the commands the server runs (MONITOR), by connection address, until stopped. */
async function monitor() {
  const connection = admin()
  const seen = []
  const monitored = await connection.monitor()
  monitored.on('monitor', (_time, args, source) => seen.push({ command: String(args[0]).toLowerCase(), args, source }))
  return { seen, stop: () => monitored.disconnect() }
}

test('the commands of a call go out on the event loop\'s connection, not the core\'s, as the URL\'s user on its database', async () => {
  const watch = await monitor()
  const client = await Client.connect(userUrl(redis.port, '/3'))
  try {
    // The connect's own writes (its client record) go on the core's connection.
    const record = `polylock:client:${client.id}`
    await waitFor('the client record written', async () => {
      if (!watch.seen.some((entry) => entry.command === 'hset' && entry.args[1] === record)) throw new NotYet('no HSET yet')
    })
    const core = new Set(watch.seen.filter((entry) => entry.args[1] === record).map((entry) => entry.source))
    const lock = client.lock(fresh('hot'))
    for (let i = 0; i < 5; i += 1) {
      assert.equal(await lock.acquire({}), true)
      await lock.release()
    }
    // MONITOR's lines come on their own connection: wait for the ten cycles' scripts.
    await waitFor('the scripts seen by MONITOR', async () => {
      const seen = watch.seen.filter((entry) => entry.command === 'evalsha').length
      if (seen < 10) throw new NotYet(`${seen} EVALSHA`)
    })
    const scripts = watch.seen.filter((entry) => entry.command === 'evalsha' || entry.command === 'eval')
    const sources = new Set(scripts.map((entry) => entry.source))
    assert.equal(sources.size, 1, `one connection sent the scripts: ${[...sources]}`)
    const [hot] = sources
    assert.ok(!core.has(hot), `the scripts went on the core's connection (${hot})`)
    // That connection authenticated as the URL's user and selected database 3.
    assert.ok(watch.seen.some((entry) => entry.source === hot && entry.command === 'select' && String(entry.args[1]) === '3'))
    const connection = admin()
    try {
      assert.equal(await userAt(connection, hot), 'loop_node')
    } finally {
      connection.disconnect()
    }
  } finally {
    await client.close()
    watch.stop()
  }
})

test('the calls of many concurrent holders all go out and settle', async () => {
  // While calls wait for replies, their commands go out a few in one write (core/src/connection/
  // loop_link.rs, defer_writes); every reply must reach its own call.
  const client = await Client.connect(userUrl(), { responseTimeoutMs: 30_000 })
  try {
    const chains = Array.from({ length: 64 }, async (_, index) => {
      const lock = client.lock(fresh(`many-${index}`))
      for (let i = 0; i < 100; i += 1) {
        assert.equal(await lock.acquire({}), true)
        await lock.release()
      }
      return 100
    })
    assert.deepEqual(await Promise.all(chains), Array(64).fill(100))
  } finally {
    await client.close()
  }
})

test('close() closes the event loop\'s connection', async () => {
  // (The core's command connection closes when the last handle is collected, docs/PROTOCOL.md.)
  const watch = await monitor()
  const connection = admin()
  try {
    const client = await Client.connect(userUrl())
    const lock = client.lock(fresh('close'))
    assert.equal(await lock.acquire({}), true)
    await lock.release()
    await waitFor('the scripts seen by MONITOR', async () => {
      if (!watch.seen.some((entry) => entry.command === 'evalsha')) throw new NotYet('no EVALSHA yet')
    })
    const hot = watch.seen.find((entry) => entry.command === 'evalsha').source
    assert.ok((await addresses(connection)).includes(hot))
    await client.close()
    await waitFor('the event loop\'s connection closed', async () => {
      if ((await addresses(connection)).includes(hot)) throw new NotYet(`${hot} is still open`)
    })
  } finally {
    connection.disconnect()
    watch.stop()
  }
})

test('a value the socket cannot take at once goes out whole', async () => {
  const client = await Client.connect(userUrl())
  try {
    const election = client.election(fresh('big'))
    const leadership = await election.campaign('small', { waitMs: 5000 })
    assert.ok(leadership, 'elected')
    // 32 MiB, far more than a loopback socket's send buffer: the event loop writes the rest
    // when the socket can take it. (A proclaim runs on the calling thread.)
    const value = 'v'.repeat(32 * 1024 * 1024 - 7) + 'the end'
    await leadership.proclaim(value)
    const leader = await election.leader()
    assert.equal(leader.value.length, value.length)
    assert.ok(leader.value === value, 'the announced value differs')
    await leadership.proclaim('small again')
    assert.equal((await election.leader()).value, 'small again')
    await leadership.resign()
  } finally {
    await client.close()
  }
})

test('when the event loop\'s connection is cut, a call waiting on it fails as a broken connection, later calls work, and it is opened again', async () => {
  const proxy = await FaultProxy.start(redis.port)
  const client = await Client.connect(userUrl(proxy.port), { responseTimeoutMs: 60_000 })
  try {
    const lock = client.lock(fresh('cut'))
    assert.equal(await lock.acquire({}), true)
    await lock.release()
    // The client's command and pub/sub connections, and the event loop's.
    const opened = await proxy.connections()
    // Replies stop: the next call waits on the event loop's connection, far from its 60 s
    // response timeout, until the proxy closes every connection.
    await proxy.blackhole()
    const pending = lock.acquire({ waitMs: 0 }).then((acquired) => acquired, (error) => error)
    await proxy.cut()
    await proxy.passThrough()
    const outcome = await pending
    if (outcome instanceof Error) assert.equal(outcome.code, 'ERR_CONNECTION', outcome.message)
    else assert.equal(typeof outcome, 'boolean')
    if (lock.isHeld()) await lock.release()
    // Later calls go to the core's connection, which reconnects.
    await waitFor('a call after the cut', async () => {
      const acquired = await lock.acquire({ waitMs: 1000 }).catch((error) => {
        throw new NotYet(error.message)
      })
      if (!acquired) throw new NotYet('not acquired')
    })
    await lock.release()
    // And the event loop's connection is opened again in the background.
    await waitFor('the event loop\'s connection opened again', async () => {
      const now = await proxy.connections()
      if (now < opened) throw new NotYet(`${now} of ${opened} connections`)
    })
    assert.equal(await proxy.connections(), opened)
    assert.equal(await lock.acquire({ waitMs: 1000 }), true)
    await lock.release()
  } finally {
    await client.close()
    await proxy.stop()
  }
})
