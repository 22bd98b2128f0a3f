// kafkajs consumers in one consumer group, driven line by line from tests/gateway/test_gw_groups.py.
// stdin, one JSON command per line:
//   {"cmd": "config", "bootstrap": "...", "topic": "...", "group": "..."}
//   {"cmd": "add", "name": "c1"}      start a consumer (subscribe, fromBeginning, autoCommit)
//   {"cmd": "remove", "name": "c1"}   disconnect it (commits and leaves the group)
//   {"cmd": "exit"}                   disconnect everyone and exit
// stdout, one JSON event per line: {"event": "ready"|"added"|"removed"|"join"|"values"|"error", ...}
'use strict'
const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const out = obj => process.stdout.write(JSON.stringify(obj) + '\n')
let kafka = null
let spec = null
const consumers = {}

async function add(name) {
  const c = kafka.consumer({
    groupId: spec.group,
    sessionTimeout: 6000,
    rebalanceTimeout: 10000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 100,
    retry: { retries: 10, initialRetryTime: 100 },
  })
  c.on(c.events.GROUP_JOIN, e => out({ event: 'join', name, member: e.payload.memberId, assignment: e.payload.memberAssignment }))
  c.on(c.events.CRASH, e => out({ event: 'error', name, error: String(e.payload.error) }))
  await c.connect()
  await c.subscribe({ topic: spec.topic, fromBeginning: true })
  await c.run({
    autoCommitInterval: 200,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      const values = []
      for (const m of batch.messages) {
        values.push(m.value.toString())
        resolveOffset(m.offset) // processed: may be committed
      }
      if (values.length) out({ event: 'values', name, values })
      await heartbeat()
    },
  })
  consumers[name] = c
  out({ event: 'added', name })
}

async function remove(name) {
  const c = consumers[name]
  delete consumers[name]
  if (c) await c.disconnect()
  out({ event: 'removed', name })
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin })
  for await (const line of rl) {
    if (!line.trim()) continue
    const msg = JSON.parse(line)
    try {
      if (msg.cmd === 'config') {
        spec = msg
        kafka = new Kafka({ clientId: 'kafkajs-group-test', brokers: [msg.bootstrap], logLevel: logLevel.NOTHING })
        out({ event: 'ready' })
      } else if (msg.cmd === 'add') await add(msg.name)
      else if (msg.cmd === 'remove') await remove(msg.name)
      else if (msg.cmd === 'exit') {
        for (const name of Object.keys(consumers)) await remove(name)
        out({ event: 'exit' })
        process.exit(0)
      }
    } catch (e) {
      out({ event: 'error', error: String(e && e.stack ? e.stack : e) })
    }
  }
}

main().catch(e => {
  out({ event: 'error', error: String(e) })
  process.exit(1)
})
