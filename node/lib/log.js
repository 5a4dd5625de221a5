// @ts-check
'use strict'

// setLogger: the core's log events to a JavaScript function (src/log.rs).

const native = require('../native.js')
const { codedError } = require('./errors.js')

/**
 * Sends polylock's log events (the Rust core's tracing events) at `level` and above to
 * `logger(level, message, fields)`; `null` stops it. A lost lease is a `warn`.
 * @param {import('../index').Logger | null} logger
 * @param {import('../index').LogLevel} [level] default `'info'`
 */
function setLogger(logger, level) {
  if (logger !== null && typeof logger !== 'function') {
    throw codedError('ERR_INVALID_ARGUMENT', 'invalid argument: setLogger(logger): logger must be a function or null')
  }
  native.setLogger(logger, level)
}

module.exports = { setLogger }
