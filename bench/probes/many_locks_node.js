// M outside the bench, for side-by-side builds: 64 async loops on 64 locks through one Client
// for `seconds`; prints cycles/s and the process's CPU per cycle. A measuring tool:
//
//   POLYLOCK_NODE=<a copy of node/> NAPI_RS_NATIVE_LIBRARY_PATH=<an addon> \
//     node bench/probes/many_locks_node.js redis://127.0.0.1:6379 4
//
// (POLYLOCK_NODE defaults to this tree's node/; alternate two builds on one redis-server).
'use strict'
const path = require('node:path')
const { Client } = require(process.env.POLYLOCK_NODE || path.join(__dirname, '..', '..', 'node'))

async function main () {
  const [url, seconds] = [process.argv[2], Number(process.argv[3])]
  const client = await Client.connect(url)
  const locks = Array.from({ length: 64 }, (_, i) => client.lock(`mn:${i}`))
  let stop = false
  let cycles = 0
  const loops = locks.map(async (lock) => {
    while (!stop) {
      await lock.acquire()
      await lock.release()
      cycles++
    }
  })
  await new Promise((resolve) => setTimeout(resolve, 1000)) // warm-up
  const base = cycles
  const started = process.hrtime.bigint()
  const cpu = process.cpuUsage()
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
  const done = cycles - base
  const wall = Number(process.hrtime.bigint() - started) / 1e9
  const used = process.cpuUsage(cpu)
  stop = true
  await Promise.all(loops)
  await client.close()
  console.log(`${(done / wall).toFixed(0)} cycles/s  ${((used.user + used.system) / done).toFixed(1)} us cpu/cycle`)
}

main().catch((error) => { console.error(error); process.exit(1) })
