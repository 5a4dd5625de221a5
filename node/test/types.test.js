'use strict'

// The usage file and the JS layer type-check against index.d.ts and native.d.ts.

const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { test } = require('node:test')

test('tsc --noEmit accepts test/usage.ts and index.js against the declarations', () => {
  const tsc = require.resolve('typescript/bin/tsc')
  const result = spawnSync(process.execPath, [tsc, '--noEmit', '-p', path.join(__dirname, 'tsconfig.json')], {
    encoding: 'utf8',
    timeout: 120_000,
  })
  assert.equal(result.status, 0, `tsc failed:\n${result.stdout}${result.stderr}`)
})
