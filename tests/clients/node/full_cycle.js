// Drives kafkajs through a whole topic life cycle against a Kafka endpoint.
// Input (stdin, JSON): {bootstrap, topic, partitions, config, batches: [{codec, records: [[key|null, value, ts]]}], target}
// or {bootstrap, topic, mode: 'delete'} to delete the topic afterwards.
// Output (stdout, JSON): what kafkajs saw, for tests/gateway/test_gw_kafkajs.py to check.
'use strict'
const { Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, logLevel } = require('kafkajs')
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
}

function readStdin() {
  return new Promise(resolve => {
    let data = ''
    process.stdin.on('data', c => (data += c))
    process.stdin.on('end', () => resolve(JSON.parse(data)))
  })
}

// kafkajs has no consumer without a consumer group; its own cluster and broker
// objects (the code its consumer uses) issue plain Fetch requests instead.
function privateCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(s => String(s).includes('createCluster'))
  return kafka[sym]({ allowAutoTopicCreation: false })
}

async function fetchAll(cluster, topic, starts) {
  await cluster.connect()
  await cluster.addTargetTopic(topic)
  const out = []
  const next = { ...starts }
  const deadline = Date.now() + 30000
  for (;;) {
    const ends = await cluster.fetchTopicsOffset([
      { topic, partitions: Object.keys(next).map(p => ({ partition: Number(p) })) },
    ])
    const pending = ends[0].partitions.filter(p => Number(p.offset) > next[p.partition])
    if (pending.length === 0 || Date.now() > deadline) break
    const byLeader = cluster.findLeaderForPartitions(topic, pending.map(p => p.partition))
    for (const [nodeId, partitions] of Object.entries(byLeader)) {
      const broker = await cluster.findBroker({ nodeId })
      const res = await broker.fetch({
        maxWaitTime: 100,
        topics: [{ topic, partitions: partitions.map(p => ({ partition: p, fetchOffset: String(next[p]), maxBytes: 1 << 20 })) }],
      })
      for (const t of res.responses) {
        for (const p of t.partitions) {
          if (p.errorCode !== 0) throw new Error(`fetch error ${p.errorCode}`)
          for (const m of p.messages) {
            if (Number(m.offset) < next[p.partition]) continue
            out.push({
              partition: p.partition,
              offset: Number(m.offset),
              key: m.key === null ? null : m.key.toString(),
              value: m.value.toString(),
              timestamp: Number(m.timestamp),
            })
            next[p.partition] = Number(m.offset) + 1
          }
        }
      }
    }
  }
  await cluster.disconnect()
  return out
}

async function main() {
  const spec = await readStdin()
  const { topic } = spec
  const kafka = new Kafka({ clientId: 'logan-ray-kafkajs-test', brokers: [spec.bootstrap], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const result = {}
  if (spec.mode === 'delete') {
    await admin.deleteTopics({ topics: [topic] })
    result.listedAfterDelete = (await admin.listTopics()).includes(topic)
    await admin.disconnect()
    process.stdout.write(JSON.stringify(result))
    return
  }
  result.created = await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic, numPartitions: spec.partitions, replicationFactor: 1,
               configEntries: Object.entries(spec.config).map(([name, value]) => ({ name, value })) }],
  })
  result.listed = (await admin.listTopics()).includes(topic)

  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  for (const batch of spec.batches) {
    await producer.send({
      topic,
      acks: -1,
      compression: CODECS[batch.codec],
      messages: batch.records.map(([key, value, ts]) => ({ key, value, timestamp: String(ts) })),
    })
  }
  await producer.disconnect()

  const zero = {}
  for (let p = 0; p < spec.partitions; p++) zero[p] = 0
  result.consumed = await fetchAll(privateCluster(kafka), topic, zero)
  result.offsets = (await admin.fetchTopicOffsets(topic)).map(o => ({ partition: o.partition, low: Number(o.low), high: Number(o.high) }))
  result.byTime = (await admin.fetchTopicOffsetsByTimestamp(topic, spec.target)).map(o => ({ partition: o.partition, offset: Number(o.offset) }))
  const starts = {}
  for (const o of result.byTime) if (o.offset >= 0) starts[o.partition] = o.offset
  result.fromTime = await fetchAll(privateCluster(kafka), topic, starts)
  const described = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }] })
  result.configs = {}
  for (const e of described.resources[0].configEntries) result.configs[e.configName] = { value: e.configValue, isDefault: e.isDefault }
  await admin.disconnect()
  process.stdout.write(JSON.stringify(result))
}

main().catch(e => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n')
  process.exit(1)
})
