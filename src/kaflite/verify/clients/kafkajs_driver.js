// One kafkajs producer or consumer, driven by kaflite.verify (clients/_kafkajs.py).
//
// The JSON argument says which (role, brokers, clientId, ...). Requests come one JSON
// object a line on stdin ({"id": n, "op": ...}); each is answered by a line with the same
// id ({"id": n, "ok": ...} or {"id": n, "error": ..., "type": ...}). Lines without an id
// are events: a send's per-record acks, the group assignments of GROUP_JOIN, crashes.
// kafkajs logs to stderr. The process exits when stdin closes.
'use strict'

const { Kafka, logLevel, Partitioners } = require('kafkajs')

const args = JSON.parse(process.argv[2])
const kafka = new Kafka({
  clientId: args.clientId,
  brokers: args.brokers.split(','),
  logLevel: logLevel[args.logLevel || 'NOTHING'],
  logCreator: () => ({ namespace, log }) =>
    process.stderr.write(`${namespace} ${JSON.stringify(log)}\n`),
  retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 3000 },
  connectionTimeout: 3000,
  requestTimeout: 15000,
})

const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')
const failure = (e) => ({ error: `${e.name}: ${e.message}`, type: e.type || null,
  retriable: !!e.retriable })

// -- producer ------------------------------------------------------------------------------

// kafkajs's own partitioner, but asked once per message: sendMessages calls the partitioner
// again on every retry, and a record without a key would land on another round-robin
// partition the second time while the brokers that answered the first attempt are not
// asked again. Keeping the first choice keeps each send's per-partition batches (and so
// baseOffset + index) the same in every attempt.
const stickyPartitioner = () => {
  const inner = Partitioners.DefaultPartitioner()
  return (params) => {
    const m = params.message
    if (m.__partition === undefined) m.__partition = inner(params)
    return m.__partition
  }
}

function producerRole () {
  const producer = kafka.producer({
    idempotent: true, maxInFlightRequests: 1, createPartitioner: stickyPartitioner,
    transactionalId: args.transactionalId || undefined, transactionTimeout: 20000,
  })
  let chain = Promise.resolve()     // sends, one after another
  let txn = null
  let txnFailed = null              // the first failed send of the open transaction

  // Records [{seq, value, key}] of one topic in one kafkajs send; acks event when done.
  const send = (topic, records) => {
    const via = txn
    const messages = records.map((r) => ({ value: r.value, key: r.key }))
    chain = chain.then(async () => {
      let acks
      try {
        const target = via || producer
        const answer = await target.send({ topic, messages, acks: -1 })
        const base = new Map(answer.map((a) => [a.partition, a]))
        const next = new Map()
        acks = records.map((r, i) => {
          const p = messages[i].__partition
          const a = base.get(p)
          if (a === undefined) {
            return [r.seq, null, null, `kafkajs resolved send() with no answer for partition ${p}`]
          }
          const k = next.get(p) || 0
          next.set(p, k + 1)
          if (a.errorCode) return [r.seq, null, null, `error code ${a.errorCode}`]
          return [r.seq, p, Number(a.baseOffset) + k, null]
        })
      } catch (e) {
        if (via && !txnFailed) txnFailed = e
        const why = failure(e).error
        acks = records.map((r) => [r.seq, null, null, why])
      }
      out({ event: 'acks', acks })
    })
  }

  const ops = {
    connect: async () => { await producer.connect() },
    // One record per kafkajs send(), so that each send has one partition, led by one
    // broker. kafkajs 2.2.4 retries a send only on the brokers that have not answered
    // it yet: a partition whose leader moved to a broker that did answer (for another
    // partition) is never sent, and send() still resolves; its producer sequence is
    // then reused by the next batch, which the broker answers as a duplicate of the
    // first (lost writes acked at another record's offset). Upstream:
    // tulios/kafkajs#1303, PR #1798. Seen with --client kafkajs --seed 591842323.
    send: async ({ topic, records }) => { for (const r of records) send(topic, [r]) },
    flush: async () => { await chain },
    // InitProducerId (fences an older producer of the transactional id); nothing to end.
    init: async () => { const t = await producer.transaction(); await t.abort() },
    begin: async () => { txn = await producer.transaction(); txnFailed = null },
    sendOffsets: async ({ group, offsets }) => {
      await chain
      if (txnFailed) throw txnFailed
      const topics = {}
      for (const [topic, partition, offset] of offsets) {
        (topics[topic] = topics[topic] || []).push({ partition, offset: String(offset) })
      }
      await txn.sendOffsets({ consumerGroupId: group,
        topics: Object.entries(topics).map(([topic, partitions]) => ({ topic, partitions })) })
    },
    commit: async () => {
      await chain
      if (txnFailed) { const e = txnFailed; e.sendFailed = true; throw e }
      const t = txn
      txn = null
      await t.commit()
    },
    abort: async () => {
      await chain
      const t = txn
      txn = null
      await t.abort()
    },
    close: async () => { await producer.disconnect() },
  }
  return ops
}

// -- consumer ------------------------------------------------------------------------------

function consumerRole () {
  const consumer = kafka.consumer({
    groupId: args.groupId, sessionTimeout: 6000, heartbeatInterval: 500,
    readUncommitted: args.isolation !== 'read_committed',
  })
  const buffer = []                 // [topic, partition, offset, value] not yet polled
  const waiters = new Set()         // eachBatch calls waiting for their records to be polled
  let pollWake = null

  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    // A new generation: what was fetched for the old one and not polled is dropped (the
    // new owner of each partition resumes from the committed offsets).
    buffer.length = 0
    for (const w of waiters) w.release('rejoined')
    out({ event: 'join', assignment: e.payload.memberAssignment })
  })
  consumer.on(consumer.events.CRASH, (e) => {
    out({ event: 'crash', error: String(e.payload.error), restart: !!e.payload.restart })
  })

  const eachBatch = async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
    if (!isRunning() || isStale()) return
    if (batch.messages.length === 0) {   // only control records or aborted ones
      resolveOffset(batch.lastOffset())
      return
    }
    const { topic, partition } = batch
    const mine = batch.messages.map((m) => [topic, partition, Number(m.offset),
      m.value === null ? null : m.value.toString()])
    let why = null      // 'polled', 'seek' or 'rejoined'
    const waiter = { topic, partition, release: null }
    const polled = new Promise((resolve) => {
      waiter.release = (reason) => { if (why === null) why = reason; resolve() }
    })
    waiters.add(waiter)
    buffer.push(...mine)
    if (pollWake) pollWake()
    try {
      // Backpressure: the batch is done (and kafkajs fetches on) once Python polled it.
      while (why === null) {
        await Promise.race([polled, new Promise((resolve) => setTimeout(resolve, 500))])
        if (why === null) await heartbeat()   // throws when the group rebalances
      }
    } catch (e) {
      dropPartition(topic, partition)
      throw e
    } finally {
      waiters.delete(waiter)
    }
    // Resolved (the next fetch goes on after it) only once polled: a batch released by a
    // seek or by a new generation was not, and the next fetch starts at the seek's offset
    // or at the group's committed one.
    if (why === 'polled') resolveOffset(batch.messages[batch.messages.length - 1].offset)
  }

  const dropPartition = (topic, partition) => {
    for (let i = buffer.length - 1; i >= 0; i--) {
      if (buffer[i][0] === topic && buffer[i][1] === partition) buffer.splice(i, 1)
    }
  }

  const ops = {
    connect: async () => { await consumer.connect() },
    subscribe: async ({ topics }) => {
      await consumer.subscribe({ topics, fromBeginning: true })
      await consumer.run({ autoCommit: false, partitionsConsumedConcurrently: 4,
        eachBatchAutoResolve: false, eachBatch })
    },
    poll: async ({ timeoutMs }) => {
      if (buffer.length === 0) {
        await new Promise((resolve) => {
          const t = setTimeout(resolve, timeoutMs)
          pollWake = () => { clearTimeout(t); resolve() }
        })
        pollWake = null
      }
      const records = buffer.splice(0, buffer.length)
      for (const w of waiters) w.release('polled')
      return records
    },
    commit: async ({ offsets }) => {
      await consumer.commitOffsets(offsets.map(([topic, partition, offset]) =>
        ({ topic, partition, offset: String(offset) })))
    },
    seek: async ({ topic, partition, offset }) => {
      dropPartition(topic, partition)
      for (const w of waiters) {
        if (w.topic === topic && w.partition === partition) w.release('seek')
      }
      consumer.seek({ topic, partition, offset: String(offset) })
    },
    close: async () => { await consumer.disconnect() },
  }
  return ops
}

// -- the request loop ----------------------------------------------------------------------

const ops = args.role === 'producer' ? producerRole() : consumerRole()
const readline = require('readline')
const lines = readline.createInterface({ input: process.stdin })
lines.on('line', (line) => {
  if (!line.trim()) return
  const req = JSON.parse(line)
  const op = ops[req.op]
  if (op === undefined) {
    out({ id: req.id, error: `unknown op ${req.op}`, type: null, retriable: false })
    return
  }
  op(req).then(
    (result) => out({ id: req.id, ok: result === undefined ? null : result }),
    (e) => out({ id: req.id, ...failure(e), sendFailed: !!e.sendFailed }))
})
lines.on('close', () => process.exit(0))
process.on('unhandledRejection', (e) => {
  process.stderr.write(`unhandled rejection: ${e && e.stack}\n`)
})
