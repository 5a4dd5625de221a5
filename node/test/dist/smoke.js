'use strict'

// The install test of the packed tarballs (make test-dist-node), run from a directory where
// only they are installed: requires polylock, then takes and releases a lock against a
// redis-server it starts on a free loopback port and stops by pid.

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const polylock = require('polylock')

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

async function main() {
  assert.match(require.resolve('polylock'), /node_modules[\\/]polylock[\\/]index\.js$/)
  const addon = require.resolve('polylock-linux-x64-gnu')
  assert.match(addon, /node_modules[\\/]polylock-linux-x64-gnu[\\/]polylock\.linux-x64-gnu\.node$/)
  const installed = path.dirname(require.resolve('polylock'))
  assert.deepEqual(fs.readdirSync(installed).filter((file) => file.endsWith('.node')), [],
    'the main package carries no addon')

  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'polylock-dist-redis-'))
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
    '--appendonly', 'no'], { cwd: dir, stdio: 'ignore' })
  try {
    const url = `redis://127.0.0.1:${port}`
    let client
    for (let attempt = 0; client === undefined; attempt += 1) {
      try {
        client = await polylock.Client.connect(url, { connectTimeoutMs: 500 })
      } catch (error) {
        if (attempt === 50) throw error
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    const lock = client.lock('dist:smoke', { waitMs: 1000, leaseMs: 10_000 })
    assert.equal(await lock.acquire(), true)
    const left = await lock.remainingLease()
    assert.ok(left > 0 && left <= 10_000, `remaining lease ${left}`)
    assert.equal(await client.lock('dist:smoke').acquire({ waitMs: 0 }), false)
    await lock.release()
    assert.equal(await lock.isLocked(), false)
    assert.equal(await lock.using(async () => 'ran'), 'ran')
    assert.deepEqual(await client.close(), [])
    console.log('smoke: took and released a lock through the installed packages')
  } finally {
    redis.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
