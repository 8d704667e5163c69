// kafkajs and a fault over HTTP: consume ten records, ask the broker (POST /faults on its
// metrics port) to close the connection at the next Fetch, produce ten more and consume them
// through the reconnect. Prints one JSON line: what was consumed, the fault, consumer crashes.
const http = require('http')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, metricsUrl, topic, group] = process.argv.slice(2)
const clientId = 'kafkajs-faults'
const kafka = new Kafka({ clientId, brokers: [bootstrap], logLevel: logLevel.NOTHING,
  retry: { initialRetryTime: 50, retries: 10 } })

function postFault (fault) {
  const body = JSON.stringify(fault)
  return new Promise((resolve, reject) => {
    const req = http.request(metricsUrl + '/faults', {
      method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }
    }, res => {
      let data = ''
      res.on('data', chunk => { data += chunk })
      res.on('end', () => res.statusCode === 201 ? resolve(JSON.parse(data)) : reject(new Error(data)))
    })
    req.on('error', reject)
    req.end(body)
  })
}

function waitFor (condition, ms) {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + ms
    const check = () => {
      if (condition()) return resolve()
      if (Date.now() > deadline) return reject(new Error('timed out'))
      setTimeout(check, 20)
    }
    check()
  })
}

async function main () {
  const producer = kafka.producer()
  await producer.connect()
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 })
  let crashes = 0
  consumer.on(consumer.events.CRASH, () => { crashes++ })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  await consumer.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()) } })
  const first = []
  for (let i = 0; i < 10; i++) first.push({ value: `a${i}`, partition: i % 2 })
  await producer.send({ topic, messages: first })
  await waitFor(() => got.length >= 10, 30000)
  const fault = await postFault({ api: 'Fetch', action: 'disconnect', match: { client_id: clientId } })
  const second = []
  for (let i = 0; i < 10; i++) second.push({ value: `b${i}`, partition: i % 2 })
  await producer.send({ topic, messages: second })
  await waitFor(() => got.length >= 20, 30000)
  await new Promise(resolve => setTimeout(resolve, 300)) // anything read twice would show here
  await consumer.disconnect()
  await producer.disconnect()
  console.log(JSON.stringify({ got, fault, crashes }))
  // kafkajs 2.2.4 keeps the socket it opened again after the broker closed one (seen with
  // process._getActiveHandles() after disconnect()), which would keep node running
  process.exit(0)
}

main().catch(err => { console.error(err); process.exit(1) })
