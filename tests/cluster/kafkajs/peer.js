// kafkajs, driven by tests/cluster/test_kafkajs.py: one action per run, chosen by the
// JSON argument; it prints one JSON object per line (progress, then the result).
'use strict'

const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const args = JSON.parse(process.argv[2])
const kafka = new Kafka({
  clientId: args.clientId || 'kafkajs-interop',
  brokers: args.brokers.split(','),
  logLevel: logLevel[args.logLevel || 'ERROR'],
  // kafkajs logs to stdout by default; stdout carries the results, so its log goes to stderr
  logCreator: () => ({ namespace, log }) => process.stderr.write(`${namespace} ${JSON.stringify(log)}\n`),
  retry: { retries: 10, initialRetryTime: 100 },
})

const emit = (obj) => new Promise((resolve) => process.stdout.write(JSON.stringify(obj) + '\n', resolve))

// A hard bound: a stuck client fails its test instead of hanging it.
setTimeout(() => { emit({ error: 'timed out' }).then(() => process.exit(3)) }, args.timeoutMs || 60000).unref()

async function admin () {
  const a = kafka.admin()
  await a.connect()
  const out = {}
  out.cluster = await a.describeCluster()
  out.created = await a.createTopics({
    topics: [{ topic: args.topic, numPartitions: 3, replicationFactor: 3,
               configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
    waitForLeaders: true,
  })
  out.createdAgain = await a.createTopics({ topics: [{ topic: args.topic }] })
  out.metadata = await a.fetchTopicMetadata({ topics: [args.topic] })
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  for (let p = 0; p < 3; p++) {
    const messages = Array.from({ length: 10 * (p + 1) }, (_, i) => ({ value: `p${p}-${i}`, partition: p }))
    await producer.send({ topic: args.topic, messages, acks: -1 })
  }
  await producer.disconnect()
  out.offsets = await a.fetchTopicOffsets(args.topic)
  await a.deleteTopicRecords({ topic: args.topic, partitions: [{ partition: 1, offset: '5' }] })
  out.offsetsAfterDelete = await a.fetchTopicOffsets(args.topic)
  await a.createPartitions({ topicPartitions: [{ topic: args.topic, count: 5 }] })
  out.metadataAfterGrow = await a.fetchTopicMetadata({ topics: [args.topic] })
  out.configs = await a.describeConfigs({
    resources: [{ type: 2, name: args.topic, configNames: ['retention.ms', 'cleanup.policy'] }],
    includeSynonyms: false,
  })
  await a.alterConfigs({
    resources: [{ type: 2, name: args.topic, configEntries: [{ name: 'retention.ms', value: '7200000' }] }],
  })
  out.configsAfterAlter = await a.describeConfigs({
    resources: [{ type: 2, name: args.topic, configNames: ['retention.ms'] }],
    includeSynonyms: false,
  })
  out.topics = await a.listTopics()
  await a.deleteTopics({ topics: [args.topic] })
  out.topicsAfterDelete = await a.listTopics()
  await a.disconnect()
  await emit({ result: out })
}

async function produce () {
  const producer = kafka.producer({ idempotent: !!args.idempotent, maxInFlightRequests: args.idempotent ? 1 : 5 })
  await producer.connect()
  const acks = []
  const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }
  for (let start = 0; start < args.count; start += args.batch) {
    const messages = []
    for (let i = start; i < Math.min(start + args.batch, args.count); i++) {
      messages.push({ key: `key-${i % 101}`, value: `${args.prefix}-${i}`, headers: { seq: String(i) } })
    }
    const metadata = await producer.send({
      topic: args.topic, messages, acks: -1, compression: codecs[args.compression],
    })
    for (const m of metadata) acks.push([start, m.partition, Number(m.baseOffset), m.errorCode])
  }
  await producer.disconnect()
  await emit({ result: { acks } })
}

async function consume () {
  const records = []
  const distinct = new Set()   // partition:offset, so that a re-read after a rejoin is not counted twice
  const members = []
  let done
  const finished = new Promise((resolve) => { done = resolve })
  for (let m = 0; m < (args.members || 1); m++) {
    const consumer = kafka.consumer({ groupId: args.groupId, sessionTimeout: args.sessionTimeout || 10000,
      heartbeatInterval: 500, rebalanceTimeout: args.rebalanceTimeout || 60000 })
    await consumer.connect()
    await consumer.subscribe({ topic: args.topic, fromBeginning: true })
    consumer.on(consumer.events.GROUP_JOIN, (e) => emit({ joined: m, assignment: e.payload.memberAssignment }))
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        records.push([m, partition, Number(message.offset), message.key && message.key.toString(),
          message.value.toString(), message.headers.seq ? message.headers.seq.toString() : null])
        distinct.add(`${partition}:${message.offset}`)
        if (records.length === args.progressAt) await emit({ consumed: records.length })
        if (distinct.size >= args.expected) done()
      },
    })
    members.push(consumer)
  }
  await finished
  for (const c of members) await c.disconnect()   // commits what was consumed
  await emit({ result: { records } })
}

// Transactions: one committed (with the group's offsets in it), one aborted, then a
// read_committed consumer (kafkajs's default) reads the topic back.
async function txn () {
  const producer = kafka.producer({ transactionalId: args.transactionalId, idempotent: true,
    maxInFlightRequests: 1 })
  await producer.connect()
  const committed = await producer.transaction()
  await committed.send({ topic: args.topic, acks: -1,
    messages: Array.from({ length: 6 }, (_, i) => ({ value: `keep-${i}`, partition: i % 2 })) })
  await committed.sendOffsets({ consumerGroupId: args.offsetsGroup,
    topics: [{ topic: args.topic, partitions: [{ partition: 0, offset: '3' }] }] })
  await committed.commit()
  const aborted = await producer.transaction()
  await aborted.send({ topic: args.topic, acks: -1,
    messages: Array.from({ length: 4 }, (_, i) => ({ value: `drop-${i}`, partition: i % 2 })) })
  await aborted.abort()
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: args.groupId })
  await consumer.connect()
  await consumer.subscribe({ topic: args.topic, fromBeginning: true })
  const values = []
  let done
  const finished = new Promise((resolve) => { done = resolve })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      values.push([partition, Number(message.offset), message.value.toString()])
      if (values.length >= args.expected) done()
    },
  })
  await finished
  await consumer.disconnect()
  await emit({ result: { values } })
}

// Transactions with pauses: after each step it prints {"step": name} and waits for a
// line on stdin, so that the test can move coordinators and leaders in the middle of
// a transaction. One transaction committed in two halves, one aborted after its records
// reached the log, then a read_committed consumer reads the topic back.
async function txnmoves () {
  const lines = require('readline').createInterface({ input: process.stdin })[Symbol.asyncIterator]()
  const step = async (name) => { await emit({ step: name }); await lines.next() }
  const batch = (prefix, from, n) => Array.from({ length: n },
    (_, i) => ({ value: `${prefix}-${from + i}`, partition: (from + i) % args.partitions }))
  const producer = kafka.producer({ transactionalId: args.transactionalId, idempotent: true,
    maxInFlightRequests: 1 })
  await producer.connect()
  const half = args.count / 2
  const committed = await producer.transaction()
  await committed.send({ topic: args.topic, acks: -1, messages: batch('keep', 0, half) })
  await step('half')
  await committed.send({ topic: args.topic, acks: -1, messages: batch('keep', half, half) })
  await committed.commit()
  const aborted = await producer.transaction()
  await aborted.send({ topic: args.topic, acks: -1, messages: batch('drop', 0, args.aborted) })
  await step('aborting')
  await aborted.abort()
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: args.groupId })   // read_committed by default
  await consumer.connect()
  await consumer.subscribe({ topic: args.topic, fromBeginning: true })
  const values = []
  let done
  const finished = new Promise((resolve) => { done = resolve })
  await consumer.run({
    eachMessage: async ({ message }) => {
      values.push(message.value.toString())
      if (values.length >= args.count) done()
    },
  })
  await finished
  await new Promise((resolve) => setTimeout(resolve, 500))   // anything beyond comes now
  await consumer.disconnect()
  await emit({ result: { values } })
}

const actions = { admin, produce, consume, txn, txnmoves }
actions[args.action]().then(() => process.exit(0), (err) => {
  emit({ error: `${err.name}: ${err.message}`, type: err.type || null }).then(() => process.exit(1))
})
