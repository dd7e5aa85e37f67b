// kafkajs as a SASL/PLAIN user against an authorizing kaflite cluster, driven by
// test_enforced.py: produce to a topic and join a group it may not use; prints
// {"produce": <error type>, "group": <error type>} (null when it worked).

'use strict'

const path = require('path')
const { Kafka, logLevel } = require(path.join(__dirname, '..', 'kafkajs', 'node_modules', 'kafkajs'))

const args = JSON.parse(process.argv[2])
setTimeout(() => { process.stderr.write('timed out\n'); process.exit(3) }, 60000).unref()

const coordinatorErrors = []
const kafka = new Kafka({
  clientId: 'kjs-acl',
  brokers: args.brokers.split(','),
  sasl: { mechanism: 'plain', username: args.username, password: args.password },
  // kafkajs logs, at debug level, the error a FindCoordinator got before it gives up with
  // KafkaJSGroupCoordinatorNotFound: that is where the broker's code is kept
  logLevel: logLevel.DEBUG,
  logCreator: () => ({ log }) => {
    if (log.message === 'Tried to find group coordinator' && log.error) coordinatorErrors.push(log.error.type)
  },
  retry: { retries: 2, initialRetryTime: 100 },
})

async function errorType (action) {
  try {
    await action()
    return null
  } catch (err) {
    // kafkajs wraps the broker's error (retrier, coordinator lookup): find its code
    const seen = []
    for (let e = err; e && seen.length < 10; e = e.originalError || e.cause || e.retriableError) {
      seen.push(e)
      if (e.type) return e.type
    }
    return seen.map((e) => `${e.name}: ${e.message}`).join(' <- ')
  }
}

async function main () {
  const producer = kafka.producer()
  await producer.connect()
  const produce = await errorType(() => producer.send({ topic: args.topic, acks: -1, messages: [{ value: 'x' }] }))
  await producer.disconnect()
  const admin = kafka.admin()
  await admin.connect()
  let group = await errorType(() => admin.fetchOffsets({ groupId: args.group, topics: [args.readable] }))
  if (group && group.startsWith('KafkaJSGroupCoordinatorNotFound') && coordinatorErrors.length) group = coordinatorErrors[0]
  await admin.disconnect()
  process.stdout.write(JSON.stringify({ produce, group }) + '\n')
}

main().catch((err) => { process.stderr.write(`${err.stack}\n`); process.exit(1) })
