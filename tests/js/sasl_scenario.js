// kafkajs over a SASL_PLAINTEXT listener (tests/security/test_sasl_other_clients.py), or a
// SASL_SSL one when CA_FILE is given (tests/security/test_sasl_ssl_clients.py): produce, then
// consume in a group and commit. Usage:
//   node sasl_scenario.js BOOTSTRAP TOPIC GROUP MECHANISM USER PASSWORD [CA_FILE]
// MECHANISM is plain, scram-sha-256, scram-sha-512 or oauthbearer (USER is then the token's
// subject: an unsecured JWS, alg none, made here). Prints one JSON line: {"values": [...]} or
// {"error": name, "message": ...} (exit status 2) when the client fails, e.g. a wrong password.
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, group, mechanism, user, password, caFile] = process.argv.slice(2)

function unsecuredJws (subject) {
  const part = (obj) => Buffer.from(JSON.stringify(obj)).toString('base64url')
  const now = Math.floor(Date.now() / 1000)
  return `${part({ alg: 'none' })}.${part({ sub: subject, iat: now, exp: now + 3600 })}.`
}

const sasl = mechanism === 'oauthbearer'
  ? { mechanism, oauthBearerProvider: async () => ({ value: unsecuredJws(user) }) }
  : { mechanism, username: user, password }

const kafka = new Kafka({
  clientId: 'kafkajs-sasl',
  brokers: [bootstrap],
  sasl,
  ssl: caFile ? { ca: [fs.readFileSync(caFile, 'utf-8')] } : false,
  logLevel: logLevel.NOTHING,
  // generous timeouts for a loaded test machine: one run of the suite once saw kafkajs fail a
  // SCRAM-SHA-512 login with ILLEGAL_SASL_STATE (a second SaslHandshake on a connection in the
  // middle of its exchange?); not seen again in 16 parallel runs, cause not established
  authenticationTimeout: 60000,
  requestTimeout: 60000,
  retry: { retries: 1 }
})

async function main () {
  const producer = kafka.producer()
  await producer.connect()
  const sent = []
  for (let i = 0; i < 5; i++) sent.push({ value: `kafkajs-${mechanism}-${i}` })
  await producer.send({ topic, messages: sent })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 1000 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 20000)
    consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString())
        if (values.length >= sent.length) { clearTimeout(timer); resolve() }
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  console.log(JSON.stringify({ values }))
}

main().catch((e) => {
  console.log(JSON.stringify({ error: e.name, message: e.message }))
  process.exit(2)
})
