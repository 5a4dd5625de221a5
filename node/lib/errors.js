// @ts-check
'use strict'

// The errors this layer itself reports (src/error.rs maps the core's).

/** An `Error` with a `code`, for the failures this layer itself reports. */
function codedError(/** @type {string} */ code, /** @type {string} */ message) {
  return Object.assign(new Error(message), { code })
}

module.exports = { codedError }
