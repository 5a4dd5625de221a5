// @ts-check
'use strict'

// ReadWriteLock: one owner's read lock and write lock (src/read_write_lock.rs).

const native = require('../native.js')
const { codedError } = require('./errors.js')
const { Lock } = require('./lock.js')

class ReadWriteLock {
  /** @type {import('../native').ReadWriteLock} */
  #native
  /** @type {Lock} */
  #read
  /** @type {Lock} */
  #write

  /** @param {import('../native').ReadWriteLock} handle @internal */
  constructor(handle) {
    if (!(handle instanceof native.ReadWriteLock)) {
      throw codedError('ERR_INVALID_ARGUMENT', 'use client.readWriteLock(name) to make a read-write lock')
    }
    this.#native = handle
    this.#read = new Lock(handle.readLock())
    this.#write = new Lock(handle.writeLock())
  }

  get name() {
    return this.#native.name
  }

  /** The read lock of this owner (the same handle on every call): readers share it. */
  readLock() {
    return this.#read
  }

  /** The write lock of this owner (the same handle on every call): it excludes everyone else. */
  writeLock() {
    return this.#write
  }
}

module.exports = { ReadWriteLock }
