'use strict'

// Who holds it: the `name` option is recorded on the server (the client record,
// `polylock:client:<client-id>`), and a `using` whose wait runs out names the holder in the
// core's message, the same text as Rust, Python and Kotlin.

const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const os = require('node:os')
const path = require('node:path')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { startRedis, freshNames, waitFor, NotYet } = require('./redis.js')

let redis
before(async () => {
  redis = await startRedis()
})
after(async () => {
  await redis?.stop()
})
const fresh = freshNames('record')

/** Resolves once the client's record lists a hold (written about a second after it began). */
async function listed(client) {
  await waitFor('the hold in the client record', async () => {
    const holds = await redis.command('HGET', `polylock:client:${client.id}`, 'holds')
    if (!holds || JSON.parse(holds).length === 0) throw new NotYet(String(holds))
  })
}

function escaped(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

test('the name option is recorded and read back; the default is host:pid', async () => {
  const client = await Client.connect(redis.url, { name: 'worker-7' })
  const unnamed = await Client.connect(redis.url)
  try {
    assert.equal(client.name, 'worker-7')
    assert.equal(await redis.command('HGET', `polylock:client:${client.id}`, 'name'), 'worker-7')
    assert.equal(await redis.command('HGET', `polylock:client:${client.id}`, 'pid'), String(process.pid))
    assert.equal(unnamed.name, `${os.hostname()}:${process.pid}`)
    await assert.rejects(Client.connect(redis.url, { name: ' ' }), { code: 'ERR_INVALID_ARGUMENT' })
  } finally {
    await client.close()
    await unnamed.close()
  }
})

test('a using() whose wait runs out names the holder', async () => {
  const name = fresh('named')
  const holder = await Client.connect(redis.url, { name: 'worker-7' })
  const waiter = await Client.connect(redis.url)
  try {
    const held = holder.lock(name)
    assert.equal(await held.acquire(), true)
    await listed(holder)
    const expected = new RegExp(
      '^' +
        escaped(
          `lock '${name}' was not acquired within 250 ms: another owner held it all that time ` +
            `(held by 'worker-7', pid ${process.pid} on ${os.hostname()}, for `,
        ) +
        '\\d+\\.\\d s\\)$',
    )
    await assert.rejects(
      waiter.lock(name).using(() => assert.fail('the routine ran'), { waitMs: 250 }),
      { code: 'ERR_TIMEOUT', message: expected },
    )
    await held.release()
  } finally {
    await holder.close()
    await waiter.close()
  }
})

test('an owner without a record is named by its owner string', async () => {
  const name = fresh('stranger')
  const stranger = '5f3e1c2a-0000-4000-8000-000000000001:1'
  await redis.command('HSET', name, stranger, 1)
  await redis.command('PEXPIRE', name, 60000)
  const waiter = await Client.connect(redis.url)
  try {
    await assert.rejects(waiter.lock(name).using(() => 'never', { waitMs: 100 }), {
      code: 'ERR_TIMEOUT',
      message:
        `lock '${name}' was not acquired within 100 ms: another owner held it all that time ` +
        `(held by owner ${stranger}, no polylock client record)`,
    })
  } finally {
    await waiter.close()
  }
})

test('a process that awaits close() and exits at once leaves no record', async () => {
  // close() resolves once the record's DEL is answered: it used to go in the background and
  // die with the process, leaving the record for a watchdog lease.
  const script = `
    const { Client } = require(${JSON.stringify(path.join(__dirname, '..'))})
    Client.connect(process.argv[1]).then(async (client) => {
      process.stdout.write(client.id + '\\n')
      await client.close()
      process.exit(0)
    })`
  const clientId = execFileSync(process.execPath, ['-e', script, redis.url], { encoding: 'utf8', timeout: 60_000 }).trim()
  assert.match(clientId, /^[0-9a-f-]{36}$/)
  assert.equal(await redis.command('EXISTS', `polylock:client:${clientId}`), 0)
})
