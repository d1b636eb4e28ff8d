// KafkaJS's side of the compatibility matrix: one node process serves a whole pytest session.
// Reads one JSON command per line on stdin, runs it with KafkaJS, writes one JSON answer per line:
// {"ok": true, "result": ...} or {"ok": false, "error": ...}. Bytes travel base64-encoded (null stays
// null); the Python side (odradek_compat/clients/kafkajs.py) makes the assertions.
'use strict'

const readline = require('readline')
const { Kafka, logLevel, CompressionTypes, CompressionCodecs, ConfigResourceTypes, Partitioners } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec

const bootstrap = process.argv[2]
// optional security settings as KafkaJS takes them ({"ssl": {...}, "sasl": {...}}): argv[3], JSON
const security = process.argv[3] ? JSON.parse(process.argv[3]) : {}
const kafka = new Kafka({
  ...security,
  clientId: 'odradek-compat-kafkajs',
  brokers: [bootstrap],
  logLevel: process.env.KAFKAJS_LOG ? logLevel.INFO : logLevel.NOTHING,
  connectionTimeout: 5000,
  requestTimeout: 30000,
  retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 3000 }
})
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy }
const ACKS = { all: -1, '-1': -1, 1: 1, 0: 0 }

const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = (text) => (text === null || text === undefined ? null : Buffer.from(text, 'base64'))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let admin = null
async function getAdmin () {
  if (!admin) {
    admin = kafka.admin()
    await admin.connect()
  }
  return admin
}

function headersToObject (headers) {
  const out = {}
  for (const [key, value] of headers || []) {
    const buf = unb64(value)
    if (key in out) out[key] = [].concat(out[key], [buf])
    else out[key] = buf
  }
  return out
}

function headersToList (headers) {
  const out = []
  for (const [key, value] of Object.entries(headers || {})) {
    for (const v of Array.isArray(value) ? value : [value]) out.push([key, b64(v)])
  }
  return out
}

function toMessage (r) {
  const m = { key: unb64(r.key), value: unb64(r.value), headers: headersToObject(r.headers) }
  if (r.partition !== null && r.partition !== undefined) m.partition = r.partition
  if (r.timestamp !== null && r.timestamp !== undefined) m.timestamp = String(r.timestamp)
  return m
}

function recordJson (partition, message) {
  return {
    partition,
    offset: Number(message.offset),
    timestamp: Number(message.timestamp),
    key: b64(message.key),
    value: b64(message.value),
    headers: headersToList(message.headers)
  }
}

async function produce (cmd) {
  const producer = kafka.producer({
    idempotent: cmd.idempotent === true,
    maxInFlightRequests: cmd.idempotent ? 1 : undefined,
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner
  })
  await producer.connect()
  try {
    // Apply KafkaJS's own default partitioner here (as send() would) so each record's partition is known.
    const partitionMetadata = (await (await getAdmin()).fetchTopicMetadata({ topics: [cmd.topic] })).topics[0].partitions
    const partitioner = Partitioners.DefaultPartitioner()
    const messages = cmd.records.map((r) => {
      const m = toMessage(r)
      if (m.partition === undefined) m.partition = partitioner({ topic: cmd.topic, partitionMetadata, message: m })
      return m
    })
    const acks = ACKS[cmd.acks]
    let metadata
    try {
      metadata = await producer.send({ topic: cmd.topic, acks, compression: CODECS[cmd.compression], messages })
    } catch (e) {
      return cmd.records.map(() => ({ error: `${e.name}: ${e.message}` }))
    }
    if (acks === 0) return cmd.records.map(() => ({ partition: null, offset: null }))
    // KafkaJS answers per partition (base offset); records keep their order within a partition.
    const base = {}
    for (const md of metadata) base[md.partition] = Number(md.baseOffset)
    return messages.map((m) => {
      const offset = base[m.partition]
      base[m.partition] += 1
      return { partition: m.partition, offset }
    })
  } finally {
    await producer.disconnect()
  }
}

// Reads everything up to the end offsets seen at the start (see eachBatch for read_uncommitted): KafkaJS
// only consumes through a group, so a throwaway group subscribes and each partition stops once its end
// is reached (or nothing more arrives for a while after the group join: the tail of a partition may be
// a transaction marker).
async function consume (cmd) {
  const adm = await getAdmin()
  const offsets = await adm.fetchTopicOffsets(cmd.topic)
  const wanted = cmd.partitions ? new Set(cmd.partitions) : null
  const end = {}
  for (const o of offsets) if (!wanted || wanted.has(o.partition)) end[o.partition] = Number(o.high)
  const consumer = kafka.consumer({
    groupId: `compat-kafkajs-${process.pid}-${Date.now()}-${Math.random().toString(16).slice(2, 8)}`,
    readUncommitted: cmd.isolation !== 'read_committed',
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 200
  })
  const records = []
  const next = {}
  let lastProgress = null
  consumer.on(consumer.events.GROUP_JOIN, () => { lastProgress = Date.now() })
  const done = () => Object.keys(end).every((p) => (next[p] !== undefined ? next[p] : (cmd.start ? cmd.start[p] : 0)) >= end[p])
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [cmd.topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        lastProgress = Date.now()
        const p = batch.partition
        if (!(p in end)) return
        // KafkaJS's admin lists offsets read_committed (the last stable offset); a read_uncommitted reader
        // goes on to the high watermark, which every fetched batch carries.
        if (cmd.isolation !== 'read_committed') end[p] = Math.max(end[p], Number(batch.highWatermark))
        for (const m of batch.messages) {
          if (Number(m.offset) < end[p]) records.push(recordJson(p, m))
        }
        if (batch.messages.length) next[p] = Number(batch.lastOffset()) + 1
      }
    })
    if (cmd.start) for (const [p, o] of Object.entries(cmd.start)) consumer.seek({ topic: cmd.topic, partition: Number(p), offset: String(o) })
    const deadline = Date.now() + cmd.timeout_ms
    while (Date.now() < deadline && !done()) {
      if (lastProgress !== null && Date.now() - lastProgress > 3000) break
      await sleep(50)
    }
  } finally {
    await consumer.disconnect()
  }
  return records
}

async function offsetsForTimes (cmd) {
  const adm = await getAdmin()
  const out = []
  for (const ts of cmd.timestamps) {
    const answer = await adm.fetchTopicOffsetsByTimestamp(cmd.topic, ts)
    const found = answer.find((o) => o.partition === cmd.partition)
    out.push(found === undefined || Number(found.offset) < 0 ? null : Number(found.offset))
  }
  return out
}

// ---- consumer groups ----
const members = {}
let nextHandle = 1

async function groupOpen (cmd) {
  const handle = `m${nextHandle++}`
  const member = {
    consumer: kafka.consumer({
      groupId: cmd.group,
      sessionTimeout: cmd.session_timeout_ms,
      heartbeatInterval: 1000,
      rebalanceTimeout: 30000,
      maxWaitTimeInMs: 200
    }),
    buffer: [],
    positions: {},
    assignment: [],
    assignedEvents: 0,
    revokedEvents: 0,
    error: null
  }
  const c = member.consumer
  c.on(c.events.GROUP_JOIN, (e) => {
    member.assignedEvents += 1
    member.assignment = (e.payload.memberAssignment[cmd.topic] || []).slice().sort((a, b) => a - b)
  })
  c.on(c.events.REBALANCING, () => { member.revokedEvents += 1 })
  c.on(c.events.CRASH, (e) => { member.error = String(e.payload.error) })
  await c.connect()
  await c.subscribe({ topics: [cmd.topic], fromBeginning: true })
  await c.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => { member.buffer.push(recordJson(partition, message)) }
  })
  members[handle] = member
  return handle
}

async function groupPoll (cmd) {
  const member = members[cmd.handle]
  if (member.error) throw new Error(member.error)
  if (member.buffer.length === 0) await sleep(cmd.timeout_ms)
  const records = member.buffer.splice(0)
  for (const r of records) member.positions[r.partition] = r.offset + 1
  return { records, assignment: member.assignment, assigned_events: member.assignedEvents, revoked_events: member.revokedEvents }
}

async function groupCommit (cmd) {
  const member = members[cmd.handle]
  const offsets = Object.entries(member.positions).map(([p, o]) => ({ topic: cmd.topic, partition: Number(p), offset: String(o) }))
  if (offsets.length) await member.consumer.commitOffsets(offsets)
  return null
}

// ---- transactions ----
async function txnProduce (cmd) {
  const producer = kafka.producer({ transactionalId: cmd.transactional_id, maxInFlightRequests: 1, idempotent: true, transactionTimeout: 60000 })
  await producer.connect()
  try {
    for (const batch of cmd.batches) {
      const txn = await producer.transaction()
      await txn.send({ topic: cmd.topic, messages: batch.records.map(toMessage) })
      if (batch.commit) await txn.commit()
      else await txn.abort()
    }
  } finally {
    await producer.disconnect()
  }
  return null
}

const openTransactions = {}

async function txnOpen (cmd) {
  const producer = kafka.producer({ transactionalId: cmd.transactional_id, maxInFlightRequests: 1, idempotent: true, transactionTimeout: 60000 })
  await producer.connect()
  const txn = await producer.transaction()
  await txn.send({ topic: cmd.topic, messages: cmd.records.map(toMessage) })
  const handle = `t${nextHandle++}`
  openTransactions[handle] = { producer, txn }
  return handle
}

async function txnClose (cmd) {
  const { producer, txn } = openTransactions[cmd.handle]
  delete openTransactions[cmd.handle]
  try {
    if (cmd.commit) await txn.commit()
    else await txn.abort()
  } finally {
    await producer.disconnect()
  }
  return null
}

async function consumeTransformProduce (cmd) {
  const producer = kafka.producer({ transactionalId: cmd.transactional_id, maxInFlightRequests: 1, idempotent: true, transactionTimeout: 60000 })
  const consumer = kafka.consumer({ groupId: cmd.group, sessionTimeout: 10000, heartbeatInterval: 1000, maxWaitTimeInMs: 200 })
  let done = 0
  let failure = null
  await producer.connect()
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [cmd.in_topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        if (!batch.messages.length) return
        const txn = await producer.transaction()
        try {
          await txn.send({
            topic: cmd.out_topic,
            messages: batch.messages.map((m) => ({ key: m.key, value: m.value === null ? null : Buffer.from(m.value.toString('utf8').toUpperCase(), 'utf8') }))
          })
          await txn.sendOffsets({
            consumerGroupId: cmd.group,
            topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: String(Number(batch.lastOffset()) + 1) }] }]
          })
          await txn.commit()
          done += batch.messages.length
        } catch (e) {
          failure = e
          await txn.abort().catch(() => {})
        }
      }
    })
    const deadline = Date.now() + cmd.timeout_ms
    while (Date.now() < deadline && done < cmd.count && failure === null) await sleep(50)
  } finally {
    await consumer.disconnect()
    await producer.disconnect()
  }
  if (failure) throw failure
  return done
}

async function run (cmd) {
  switch (cmd.op) {
    case 'metadata': {
      const adm = await getAdmin()
      const c = await adm.describeCluster()
      return {
        cluster_id: c.clusterId,
        controller_id: c.controller,
        brokers: c.brokers.map((b) => ({ id: b.nodeId, host: b.host, port: b.port })),
        topics: await adm.listTopics()
      }
    }
    case 'create_topic': {
      const configEntries = Object.entries(cmd.configs || {}).map(([name, value]) => ({ name, value: String(value) }))
      const created = await (await getAdmin()).createTopics({
        topics: [{ topic: cmd.topic, numPartitions: cmd.partitions, replicationFactor: 1, configEntries }],
        waitForLeaders: true,
        timeout: 30000
      })
      if (!created) throw new Error(`topic ${cmd.topic} was not created (it already exists)`)
      return null
    }
    case 'describe_topic': {
      const md = await (await getAdmin()).fetchTopicMetadata({ topics: [cmd.topic] })
      return { partitions: md.topics[0].partitions.map((p) => ({ partition: p.partitionId, leader: p.leader })) }
    }
    case 'describe_configs': {
      const answer = await (await getAdmin()).describeConfigs({
        resources: [{ type: ConfigResourceTypes.TOPIC, name: cmd.topic }],
        includeSynonyms: false
      })
      const out = {}
      for (const e of answer.resources[0].configEntries) out[e.configName] = e.configValue
      return out
    }
    case 'create_partitions':
      await (await getAdmin()).createPartitions({ topicPartitions: [{ topic: cmd.topic, count: cmd.total }], timeout: 30000 })
      return null
    case 'delete_topic':
      await (await getAdmin()).deleteTopics({ topics: [cmd.topic], timeout: 30000 })
      return null
    case 'produce': return produce(cmd)
    case 'consume': return consume(cmd)
    case 'offsets_for_times': return offsetsForTimes(cmd)
    case 'list_offsets': {
      const out = {}
      for (const o of await (await getAdmin()).fetchTopicOffsets(cmd.topic)) out[o.partition] = [Number(o.low), Number(o.high)]
      return out
    }
    case 'commit':
      await (await getAdmin()).setOffsets({
        groupId: cmd.group,
        topic: cmd.topic,
        partitions: Object.entries(cmd.offsets).map(([p, om]) => ({ partition: Number(p), offset: String(om[0]) }))
      })
      return null
    case 'committed': {
      const answer = await (await getAdmin()).fetchOffsets({ groupId: cmd.group, topics: [cmd.topic] })
      const out = {}
      for (const p of answer[0].partitions) out[p.partition] = Number(p.offset) < 0 ? null : [Number(p.offset), p.metadata]
      return out
    }
    case 'group_offsets': {
      const answer = await (await getAdmin()).fetchOffsets({ groupId: cmd.group })
      const out = []
      for (const t of answer) for (const p of t.partitions) if (Number(p.offset) >= 0) out.push([t.topic, p.partition, Number(p.offset)])
      return out
    }
    case 'group_open': return groupOpen(cmd)
    case 'group_poll': return groupPoll(cmd)
    case 'group_commit': return groupCommit(cmd)
    case 'group_close': {
      const member = members[cmd.handle]
      delete members[cmd.handle]
      await member.consumer.disconnect()
      return null
    }
    case 'txn_produce': return txnProduce(cmd)
    case 'txn_open': return txnOpen(cmd)
    case 'txn_close': return txnClose(cmd)
    case 'consume_transform_produce': return consumeTransformProduce(cmd)
    default: throw new Error(`unknown op ${cmd.op}`)
  }
}

async function main () {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
  for await (const line of lines) {
    if (!line.trim()) continue
    let answer
    try {
      answer = { ok: true, result: await run(JSON.parse(line)) }
    } catch (e) {
      answer = { ok: false, error: `${e.name}: ${e.message}` }
    }
    process.stdout.write(JSON.stringify(answer) + '\n')
  }
  for (const member of Object.values(members)) await member.consumer.disconnect().catch(() => {})
  if (admin) await admin.disconnect()
  process.exit(0)
}

main()
