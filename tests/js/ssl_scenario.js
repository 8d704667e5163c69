// kafkajs over TLS (run by tests/security): create a topic, produce, consume in a group with
// commits. Args: bootstrap topic group ca.pem [client.crt client.key].
// Prints one JSON line: {"produced": n, "consumed": [values sorted], "committed": [[p, o]...]}.
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, group, ca, cert, key] = process.argv.slice(2)
const ssl = { ca: [fs.readFileSync(ca, 'utf-8')] }
if (cert) { ssl.cert = fs.readFileSync(cert, 'utf-8'); ssl.key = fs.readFileSync(key, 'utf-8') }
const kafka = new Kafka({ clientId: 'kafkajs-tls', brokers: [bootstrap], ssl, logLevel: logLevel.NOTHING,
                          connectionTimeout: 10000, retry: { retries: 3 } })
const N = 20

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] })
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < N; i++) messages.push({ key: `k${i}`, value: `v${i}`, partition: i % 2 })
  await producer.send({ topic, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 1000 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const consumed = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 30000)
    consumer.run({
      eachMessage: async ({ message }) => {
        consumed.push(message.value.toString())
        if (consumed.length >= N) { clearTimeout(timer); resolve() }
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  await admin.disconnect()
  console.log(JSON.stringify({
    produced: N,
    consumed: consumed.sort(),
    committed: offsets[0].partitions.map(p => [p.partition, Number(p.offset)]).sort()
  }))
}

main().catch(err => { console.log(JSON.stringify({ error: String(err) })); process.exit(1) })
