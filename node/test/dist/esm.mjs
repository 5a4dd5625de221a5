// The installed package imported as an ES module (make test-dist-node).
import assert from 'node:assert/strict'
import { Client, Lock, setLogger } from '@polylock/polylock'
import polylock from '@polylock/polylock'

assert.equal(typeof Client.connect, 'function')
assert.equal(typeof Lock, 'function')
assert.equal(typeof setLogger, 'function')
assert.equal(polylock.Client, Client)
console.log('esm: import { Client } from \'@polylock/polylock\' works')
