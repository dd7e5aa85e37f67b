// kafkajs over SASL_SSL, driven by test_interop.py: produce the given values, then
// consume them in a group; prints {"consumed": [...]} on its last line.
'use strict'

const path = require('path')
const fs = require('fs')
const { Kafka, logLevel } = require(path.join(__dirname, '..', 'kafkajs', 'node_modules', 'kafkajs'))

const args = JSON.parse(process.argv[2])
setTimeout(() => { process.stderr.write('timed out\n'); process.exit(3) }, 60000).unref()

const kafka = new Kafka({
  clientId: args.clientId,
  brokers: args.brokers.split(','),
  ssl: { ca: [fs.readFileSync(args.ca, 'utf-8')] },
  sasl: { mechanism: args.mechanism, username: args.username, password: args.password },
  logLevel: logLevel.ERROR,
  logCreator: () => ({ namespace, log }) => process.stderr.write(`${namespace} ${JSON.stringify(log)}\n`),
  retry: { retries: 10, initialRetryTime: 100 },
})

async function main () {
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic: args.topic, acks: -1, messages: args.values.map((value) => ({ value })) })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: args.group })
  await consumer.connect()
  await consumer.subscribe({ topic: args.topic, fromBeginning: true })
  const consumed = []
  await new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        consumed.push(message.value.toString())
        if (consumed.length >= args.values.length) resolve()
      },
    })
  })
  await consumer.disconnect()
  process.stdout.write(JSON.stringify({ consumed }) + '\n')
}

main().catch((err) => { process.stderr.write(`${err.stack}\n`); process.exit(1) })
