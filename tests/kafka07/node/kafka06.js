// Drives the 0.6-era Node.js client `kafka` 0.2.3 (magic-0 messages: no attributes byte) for moldau's tests;
// one JSON object per output line. Payloads are ASCII strings (the client sends strings and decodes what it
// reads as UTF-8).
//
//   node kafka06.js produce HOST PORT TOPIC PARTITION < payloads (JSON array of strings, or of arrays of
//       strings: each inner array is one PRODUCE request); prints {"produced": n} once the socket is flushed
//   node kafka06.js consume HOST PORT TOPIC PARTITION OFFSET COUNT
//       consumes from byte OFFSET until COUNT messages arrived; prints {"data": s, "next": o} per message
//       (o: the byte offset after it, as the client computed it from the sizes it read)
'use strict'
var kafka = require('kafka')

var args = process.argv.slice(2)
var mode = args[0]
var opts = { host: args[1], port: +args[2] }
var topic = args[3]
var partition = +args[4]

function out(obj) { process.stdout.write(JSON.stringify(obj) + '\n') }

function fail(err) {
  out({ error: String(err && (err.stack || err.message) || err) })
  process.exit(2)
}

setTimeout(function () { fail('timed out') }, 60000).unref()

if (mode === 'produce') {
  var input = ''
  process.stdin.on('data', function (c) { input += c })
  process.stdin.on('end', function () {
    var requests = JSON.parse(input).map(function (p) { return Array.isArray(p) ? p : [p] })
    var n = 0
    var producer = new kafka.Producer(opts)
    producer.on('error', fail)
    producer.connect(function () {
      requests.forEach(function (msgs) {
        producer.send(msgs, topic, partition)
        n += msgs.length
      })
      // PRODUCE has no response: end the connection once everything is written
      producer._connection.end(function () {
        out({ produced: n })
        process.exit(0)
      })
    })
  })
} else if (mode === 'consume') {
  var offset = +args[5]
  var count = +args[6]
  var seen = 0
  var consumer = new kafka.Consumer(Object.assign({ pollInterval: 50 }, opts))
  consumer.on('error', function (code, name) { fail('error ' + code + ' ' + name) })
  consumer.on('message', function (t, payload, next) {
    out({ data: payload, next: next })
    if (++seen >= count) { process.exit(0) }
  })
  consumer.connect(function () {
    consumer.subscribeTopic({ name: topic, partition: partition, offset: offset })
  })
} else {
  fail('unknown mode ' + mode)
}
