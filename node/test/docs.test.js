'use strict'

// Every ```js block of the README and docs/*.md runs, as written, against a real redis-server
// of the test kit, so the docs cannot drift from the API. A block is the body of an async
// function: it may use `Client`, `client` (a connected client) and `url` without making them,
// as the blocks after a page's first one do; the helpers the examples call (`loadOrder`,
// `runJob`, ...) are stubs; `redis://127.0.0.1:6379` in a block is replaced by the test
// server's URL, `require('polylock')` gives this package, and METRICS_PORT is a free port.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { after, before, describe, test } = require('node:test')

const polylock = require('..')
const { freePort, startRedis } = require('./redis.js')

const REPO_ROOT = path.join(__dirname, '..', '..')
const ONE_SERVER = /redis:\/\/127\.0\.0\.1:6379(?:\/0)?(?![0-9/])/g
const AsyncFunction = (async () => {}).constructor

/** The pages users read: the README and docs/*.md. */
function pages() {
  const docs = fs.readdirSync(path.join(REPO_ROOT, 'docs'))
    .filter((file) => file.endsWith('.md'))
    .sort()
    .map((file) => `docs/${file}`)
  return ['README.md', ...docs]
}

/** The fenced blocks whose info string's first word is `language`, with page and line. */
function blocks(language) {
  const found = []
  for (const page of pages()) {
    const lines = fs.readFileSync(path.join(REPO_ROOT, page), 'utf8').split('\n')
    for (let index = 0; index < lines.length; index += 1) {
      const opening = /^(\s*)```([^`]*)$/.exec(lines[index])
      if (opening === null) continue
      const start = index + 1
      index = start
      while (index < lines.length && lines[index].trim() !== '```') index += 1
      assert.ok(index < lines.length, `${page}:${start}: a code block that is never closed`)
      const indent = opening[1].length
      const words = opening[2].replace(/,/g, ' ').trim().split(/\s+/)
      if (words[0] === language) {
        const code = lines.slice(start, index).map((line) => line.slice(indent)).join('\n')
        found.push({ id: `${page}:${start + 1}`, page, code })
      }
    }
  }
  return found
}

/** Whether `code` declares `name` itself (so the test must not pass it in). */
function declares(code, name) {
  return new RegExp(`\\b(?:const|let|var|function|class)\\s+${name}\\b`).test(code) ||
    new RegExp(`\\b(?:const|let|var)\\s*\\{[^}]*\\b${name}\\b[^}]*\\}\\s*=`).test(code)
}

/** What a block may use without making it: the examples' helpers do nothing. */
function context(url, client) {
  return {
    Client: polylock.Client,
    url,
    client,
    require: (id) => (id === 'polylock' || id === '@polylock/polylock' ? polylock : require(id)),
    loadOrder: async (id) => ({ id, total: 42 }),
    runJob: async () => {},
    rebuildCache: async () => {},
    readCache: async () => [],
    crawl: async () => {},
    upload: async () => {},
  }
}

const JS_BLOCKS = blocks('js')

test('the Node pages have blocks', () => {
  // Guards the extraction: the pages this test is for must be found to have examples.
  const found = new Set(JS_BLOCKS.map((block) => block.page))
  assert.ok(found.has('README.md') && found.has('docs/node.md'), [...found].join(', '))
})

describe('every js block of the docs runs', () => {
  let redis
  before(async () => {
    redis = await startRedis()
    // The Prometheus example's scrape port: a free one, not the default another run may hold.
    process.env.METRICS_PORT = String(await freePort())
  })
  after(async () => {
    await redis?.stop()
  })

  for (const block of JS_BLOCKS) {
    test(block.id, { timeout: 60_000 }, async () => {
      await redis.command('FLUSHALL') // each block starts from an empty server, as a reader's would
      const client = await polylock.Client.connect(redis.url)
      const given = Object.entries(context(redis.url, client))
        .filter(([name]) => !declares(block.code, name))
      const code = block.code.replace(ONE_SERVER, redis.url)
      // The block's own client (when it makes one) comes back to be closed.
      const body = `${code}\n;return typeof client === 'undefined' ? undefined : client\n` +
        `//# sourceURL=${block.id}`
      const run = new AsyncFunction(...given.map(([name]) => name), body)
      try {
        const returned = await run(...given.map(([, value]) => value))
        if (returned !== undefined && returned !== client) await returned.close()
      } finally {
        await client.close()
      }
    })
  }
})
