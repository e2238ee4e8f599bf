// franz-kafka 0.7.x calls snappy.compress(buffer, callback) and snappy.uncompress(buffer, callback), the API
// of the native snappy package of its time (today's snappy package returns promises and ignores callbacks).
// This adapts snappyjs, a pure JavaScript implementation of the same raw snappy format, to that API.
'use strict'
var snappyjs = require('snappyjs')

function call(fn, buffer, cb) {
  var out
  try {
    out = Buffer.from(fn(buffer))
  } catch (e) {
    return process.nextTick(cb, e)
  }
  process.nextTick(cb, null, out)
}

exports.compress = function (buffer, cb) { call(snappyjs.compress, buffer, cb) }
exports.uncompress = function (buffer, cb) { call(snappyjs.uncompress, buffer, cb) }
