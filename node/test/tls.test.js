'use strict'

// TLS: a lock over rediss:// with the test CA (certificates made by tests/tls/make-certs.sh).

const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { after, before, test } = require('node:test')

const { Client } = require('..')
const { makeTlsFiles, startRedisTls } = require('./redis.js')
const { RedisCluster } = require('./redis-cluster.js')

let tlsDir
let server
before(async () => {
  tlsDir = makeTlsFiles()
  server = await startRedisTls(tlsDir)
})
after(async () => {
  await server?.stop()
  if (tlsDir !== undefined) fs.rmSync(tlsDir, { recursive: true, force: true })
})

test('a lock over rediss:// with a private CA', async () => {
  const first = await Client.connect(server.tlsUrl, { tlsCa: path.join(tlsDir, 'ca.crt') })
  const second = await Client.connect(server.tlsUrl, { tlsCa: fs.readFileSync(path.join(tlsDir, 'ca.crt'), 'utf8') })
  try {
    const mine = first.lock('tls:node')
    const theirs = second.lock('tls:node')
    assert.equal(await mine.acquire({ waitMs: 0 }), true)
    assert.equal(await theirs.acquire({ waitMs: 0 }), false)
    await mine.release()
    assert.equal(await theirs.acquire({ waitMs: 2000 }), true)
    await theirs.release()
  } finally {
    await first.close()
    await second.close()
  }
})

test('a server signed by another CA is not trusted: ERR_CONNECTION saying so', async () => {
  await assert.rejects(
    Client.connect(server.tlsUrl, { tlsCa: path.join(tlsDir, 'other-ca.crt') }),
    (error) => error.code === 'ERR_CONNECTION' && /certificate is not trusted/.test(error.message),
  )
  await assert.rejects(
    Client.connect(server.tlsUrl, { tlsCa: path.join(tlsDir, 'missing.crt') }),
    (error) => error.code === 'ERR_INVALID_ARGUMENT' && /tls_ca file .* was not found/.test(error.message),
  )
})

for (const [cert, authClients, says] of [['expired', false, /has expired/], ['server', true, /client certificate/]]) {
  test(`${cert === 'expired' ? 'an expired server certificate' : 'a missing client certificate'}: ERR_CONNECTION saying so`, async () => {
    const refusing = await startRedisTls(tlsDir, { cert, authClients })
    try {
      await assert.rejects(
        Client.connect(refusing.tlsUrl, { tlsCa: path.join(tlsDir, 'ca.crt') }),
        (error) => error.code === 'ERR_CONNECTION' && says.test(error.message),
      )
    } finally {
      await refusing.stop()
    }
  })
}

test('a lock over a TLS cluster with client certificates (rediss+cluster://)', async () => {
  const cluster = await RedisCluster.start({ primaries: 3, replicasPerPrimary: 0, tlsDir, tlsAuthClients: true })
  const tls = {
    tlsCa: path.join(tlsDir, 'ca.crt'),
    tlsCert: path.join(tlsDir, 'client.crt'),
    tlsKey: path.join(tlsDir, 'client.key'),
  }
  try {
    const first = await Client.connect(cluster.tlsUrl, tls)
    const second = await Client.connect(cluster.tlsUrl, tls)
    try {
      for (const name of ['tls:node:cluster:a', 'tls:node:cluster:b', 'tls:node:cluster:c']) {
        const mine = first.lock(name)
        const theirs = second.lock(name)
        assert.equal(await mine.acquire({ waitMs: 0 }), true)
        assert.equal(await theirs.acquire({ waitMs: 0 }), false)
        await mine.release()
        assert.equal(await theirs.acquire({ waitMs: 2000 }), true)
        await theirs.release()
      }
    } finally {
      await first.close()
      await second.close()
    }
    await assert.rejects(
      Client.connect(cluster.tlsUrl, { ...tls, tlsCa: path.join(tlsDir, 'other-ca.crt') }),
      (error) => error.code === 'ERR_CONNECTION' && /certificate is not trusted/.test(error.message),
    )
    await assert.rejects(
      Client.connect(cluster.tlsUrl, { tlsCa: path.join(tlsDir, 'ca.crt') }),
      (error) => error.code === 'ERR_CONNECTION' && /client certificate/.test(error.message),
    )
  } finally {
    await cluster.stop()
  }
})
