// kafkajs against the broker: create a topic, produce (none/gzip), consume in a group,
// commit, and resume after a restart of the consumer. Prints one JSON line of results.
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const [bootstrap, topic, group] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'kafkajs-test', brokers: [bootstrap], logLevel: logLevel.NOTHING })

async function consume (expected) {
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 1000 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 15000)
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        got.push([partition, Number(message.offset), message.value.toString()])
        if (got.length >= expected) { clearTimeout(timer); resolve() }
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  return got
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] })
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
  await admin.disconnect()

  const producer = kafka.producer()
  await producer.connect()
  const first = []
  for (let i = 0; i < 30; i++) first.push({ value: `a${i}`, partition: i % 3 })
  await producer.send({ topic, messages: first, compression: CompressionTypes.None })
  const before = await consume(30)
  const second = []
  for (let i = 0; i < 9; i++) second.push({ value: `b${i}`, partition: i % 3 })
  await producer.send({ topic, messages: second, compression: CompressionTypes.GZIP })
  await producer.disconnect()
  const after = await consume(9)

  const admin2 = kafka.admin()
  await admin2.connect()
  const offsets = await admin2.fetchOffsets({ groupId: group, topics: [topic] })
  const groups = await admin2.describeGroups([group])
  await admin2.disconnect()
  console.log(JSON.stringify({
    partitions: metadata.topics[0].partitions.length,
    before,
    after,
    committed: offsets[0].partitions.map(p => [p.partition, Number(p.offset)]).sort(),
    state: groups.groups[0].state
  }))
}

main().catch(err => { console.error(err); process.exit(1) })
