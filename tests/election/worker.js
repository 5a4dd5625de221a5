// The Node candidate of the mixed-language election test (see run.py and worker.py, whose
// behaviour it shares). Usage: node tests/election/worker.js <redis-url> <election> <lease-ms> <id>
'use strict'

const path = require('node:path')
const { Client } = require(path.join(__dirname, '..', '..', 'node'))

const ACT_EVERY_MS = 50
const now = () => process.hrtime.bigint() // CLOCK_MONOTONIC, as the other candidates
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function log(worker, event, term, at) {
  process.stdout.write(`${at} ${worker} ${event} ${term}\n`)
}

async function main() {
  const [url, name, leaseMs, worker] = process.argv.slice(2)
  const lease = Number(leaseMs)
  const client = await Client.connect(url, { watchdogTimeoutMs: lease, responseTimeoutMs: lease, name: worker })
  const election = client.election(name)
  for (;;) {
    let leadership
    try {
      leadership = await election.campaign(worker)
    } catch (error) {
      log(worker, 'error', 0, now())
      process.stderr.write(`${worker}: ${error}\n`)
      await sleep(100)
      continue
    }
    log(worker, 'lead', leadership.term, now())
    for (;;) {
      const at = now()
      if (!leadership.isLeader()) {
        log(worker, 'lost', leadership.term, at)
        break
      }
      log(worker, 'act', leadership.term, at)
      await sleep(ACT_EVERY_MS)
    }
  }
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`)
  process.exit(3)
})
