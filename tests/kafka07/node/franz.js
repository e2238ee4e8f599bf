// Drives franz-kafka 0.7.5 (a Kafka 0.7 Node.js client) for moldau's tests; one JSON object per output line.
//
//   node franz.js produce HOST PORT TOPIC COMPRESSION BATCH_SIZE < payloads (JSON array of base64 strings)
//       writes every payload to partition 0 of TOPIC (batches of BATCH_SIZE messages), waits until the
//       client has sent them all, prints {"produced": n}
//   node franz.js zkroundtrip ZK_HOST ZK_PORT TOPIC GROUP COUNT < payloads (JSON array of base64 strings)
//       finds the brokers and partitions through ZooKeeper (the client's own 0.7 ZooKeeper logic: broker
//       registry, consumer group registration and rebalancing), writes the payloads to TOPIC, then reads
//       as a member of GROUP until COUNT payloads arrived; prints {"data": base64} per payload
//   node franz.js consume HOST PORT TOPIC PARTITION OFFSET COUNT MAX_FETCH_SIZE
//       consumes from byte OFFSET until COUNT payloads arrived; prints {"fetch": o} for each FETCH the client
//       sends (o: the byte offset it computed from the sizes of what it received), {"data": base64} per payload
'use strict'
var Kafka = require('franz-kafka')

var args = process.argv.slice(2)
var mode = args[0]
var host = args[1]
var port = +args[2]
var topicName = args[3]

function out(obj) { process.stdout.write(JSON.stringify(obj) + '\n') }

function fail(err) {
  out({ error: String(err && (err.stack || err.message) || err) })
  process.exit(2)
}

// the client logs each fetch with the byte offset it computed ('fetching', topic, 'broker', id, 'partition',
// id, 'offset', n): that is how the offsets the client computes are observed (its 'offset' event passes the
// consumer object instead of the partition and carries no offset)
var noop = function () {}
var logger = {}
Object.keys(console).forEach(function (f) { logger[f] = noop })
logger.info = function () {
  if (arguments[0] === 'fetching') { out({ fetch: +arguments[7] }) }
  if (process.env.FRANZ_DEBUG) { console.error.apply(console, arguments) }
}

var kafka = new Kafka(mode === 'zkroundtrip'
  ? { zookeeper: [host + ':' + port], groupId: args[4], queueTime: 50, batchSize: 50, logger: logger }
  : { brokers: [{ id: 0, host: host, port: port }], logger: logger })
// topic options take the codec number (Kafka's string names are only read from the Kafka options)
var CODECS = { none: 0, gzip: 1, snappy: 2 }

setTimeout(function () { fail('timed out') }, 60000).unref()

kafka.connect(function () {
  if (mode === 'produce') {
    var compression = args[4]
    var batchSize = +args[5]
    var input = ''
    process.stdin.on('data', function (c) { input += c })
    process.stdin.on('end', function () {
      var payloads = JSON.parse(input)
      var topic = kafka.topic(topicName, {
        compression: CODECS[compression],
        batchSize: batchSize,
        queueTime: 50,
        partitions: { produce: ['0:1'] }
      })
      topic.on('error', fail)
      payloads.forEach(function (p) { topic.write(Buffer.from(p, 'base64')) })
      // PRODUCE has no response: wait until the buffer is empty and the socket has written everything
      var poll = setInterval(function () {
        if (topic.produceBuffer.messages.length === 0) {
          clearInterval(poll)
          setTimeout(function () {
            out({ produced: payloads.length })
            process.exit(0)
          }, 300)
        }
      }, 50)
    })
  } else if (mode === 'zkroundtrip') {
    var want = +args[5]
    var got = 0
    var input = ''
    process.stdin.on('data', function (c) { input += c })
    process.stdin.on('end', function () {
      var topic = kafka.topic(topicName)
      topic.on('error', fail)
      topic.on('data', function (d) {
        out({ data: Buffer.from(d).toString('base64') })
        if (++got >= want) { process.exit(0) }
      })
      JSON.parse(input).forEach(function (p) { topic.write(Buffer.from(p, 'base64')) })
      topic.resume()
    })
  } else if (mode === 'consume') {
    var partition = args[4]
    var offset = args[5]
    var count = +args[6]
    var maxFetchSize = +args[7]
    var seen = 0
    var topic = kafka.topic(topicName, {
      maxFetchSize: maxFetchSize,
      minFetchDelay: 10,
      maxFetchDelay: 200,
      partitions: { consume: ['0-' + partition + ':' + offset] }
    })
    topic.on('error', fail)
    topic.on('data', function (d) {
      out({ data: Buffer.from(d).toString('base64') })
      seen += 1
      if (seen >= count) {
        process.exit(0)
      }
    })
    topic.resume()
  } else {
    fail('unknown mode ' + mode)
  }
})
