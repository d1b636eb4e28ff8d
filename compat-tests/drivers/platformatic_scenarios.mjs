// @platformatic/kafka (a pure-JS client on recent protocol versions: Produce v11, Fetch v17,
// ListOffsets v9, JoinGroup v9, ConsumerGroupHeartbeat) driven through its documented API.
// Usage: node platformatic_scenarios.mjs BOOTSTRAP SCENARIO PREFIX
// Prints one JSON object: what came back (values, keys, headers, offsets, timestamps as strings);
// compat-tests/test_10_platformatic.py makes the assertions.
import {
  Admin, Consumer, Producer, ConfigResourceTypes, IncrementalAlterConfigOperationTypes,
  stringDeserializers, stringSerializers
} from '@platformatic/kafka'

const [bootstrap, scenario, prefix] = process.argv.slice(2)
const brokers = bootstrap.split(',')
const base = BigInt(Date.now()) - 600000n   // record timestamps, 10 minutes ago and on
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function until (what, condition, ms = 45000) {
  const end = Date.now() + ms
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

// BigInts and Maps as JSON: offsets and timestamps as decimal strings
function plain (value) {
  return JSON.parse(JSON.stringify(value, (_, v) => {
    if (typeof v === 'bigint') return v.toString()
    if (v instanceof Map) return Object.fromEntries(v)
    return v
  }))
}

function recordOf (m) {
  return {
    partition: m.partition,
    offset: m.offset.toString(),
    timestamp: (m.timestamp - base).toString(),
    key: m.key ?? null,
    value: m.value ?? null,
    headers: Object.fromEntries([...m.headers].map(([k, v]) => [k, v ?? null]))
  }
}

function consumer (groupId, extra = {}) {
  return new Consumer({
    groupId, clientId: `${prefix}-${groupId}`, bootstrapBrokers: brokers, deserializers: stringDeserializers,
    maxWaitTime: 300, sessionTimeout: 10000, heartbeatInterval: 500, ...extra
  })
}

// Everything from the beginning of `topics` until `count` records arrived.
async function readAll (topics, count, extra = {}) {
  const c = consumer(`${prefix}-reader-${Math.random().toString(36).slice(2)}`, extra)
  const stream = await c.consume({ topics, mode: 'earliest', autocommit: false, ...extra })
  const records = []
  stream.on('data', (m) => records.push({ topic: m.topic, ...recordOf(m) }))
  try {
    await until(`${count} records`, () => records.length >= count)
    await sleep(500)   // anything beyond `count` shows up as a failure
  } finally {
    await stream.close()
    await c.close()
  }
  return records.sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition ||
    Number(BigInt(a.offset) - BigInt(b.offset)))
}

async function admin () {
  const a = new Admin({ clientId: `${prefix}-admin`, bootstrapBrokers: brokers })
  const out = {}
  const topic = `${prefix}-admin`
  const created = await a.createTopics({
    topics: [topic], partitions: 2, replicas: 1,
    configs: [{ name: 'retention.ms', value: '86400000' }, { name: 'cleanup.policy', value: 'compact,delete' }]
  })
  out.created = created.map((t) => ({ name: t.name, partitions: t.partitions, replicas: t.replicas,
    retention: t.configuration['retention.ms'], cleanup: t.configuration['cleanup.policy'] }))
  try {
    await a.createTopics({ topics: [topic], partitions: 1, replicas: 1 })
    out.duplicate = 'created'
  } catch (e) { out.duplicate = e.errors?.[0]?.apiId ?? e.message }
  await a.createPartitions({ topics: [{ name: topic, count: 3 }] })
  const partitionCount = async () =>
    (await a.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic).partitionsCount
  // Kafka's brokers may learn of the new partition a moment after CreatePartitions answers
  for (let tries = 0; tries < 100 && (out.partitions = await partitionCount()) !== 3; tries++) await sleep(100)
  await a.incrementalAlterConfigs({ resources: [{ resourceType: ConfigResourceTypes.TOPIC, resourceName: topic,
    configs: [{ name: 'max.message.bytes', configOperation: IncrementalAlterConfigOperationTypes.SET, value: '20000' }] }] })
  const [described] = await a.describeConfigs({ resources: [{ resourceType: ConfigResourceTypes.TOPIC,
    resourceName: topic, configurationKeys: ['retention.ms', 'segment.ms', 'max.message.bytes', 'cleanup.policy'] }],
  includeSynonyms: true })
  out.configs = Object.fromEntries(described.configs.map((c) => [c.name, {
    value: c.value, source: c.configSource, synonyms: c.synonyms.map((s) => [s.name, s.value, s.source]) }]))

  const p = new Producer({ clientId: `${prefix}-p`, bootstrapBrokers: brokers, serializers: stringSerializers })
  await p.send({ messages: [0, 1, 2, 3, 4].map((i) => ({ topic, partition: 0, key: `k${i}`, value: `v${i}`,
    timestamp: base + BigInt(i) * 1000n })) })
  await p.close()
  const offsets = async (timestamp) => (await a.listOffsets({ topics: [{ name: topic,
    partitions: [{ partitionIndex: 0, timestamp }] }] }))[0].partitions[0]
  out.listOffsets = plain({ earliest: await offsets(-2n), latest: await offsets(-1n),
    byTime: await offsets(base + 2500n), beyond: await offsets(base + 99000n), maxTimestamp: await offsets(-3n) })
  out.listOffsets.byTime.timestamp = (BigInt(out.listOffsets.byTime.timestamp) - base).toString()
  out.listOffsets.maxTimestamp.timestamp = (BigInt(out.listOffsets.maxTimestamp.timestamp) - base).toString()
  out.deleteRecords = plain(await a.deleteRecords({ topics: [{ name: topic, partitions: [{ partition: 0, offset: 2n }] }] }))
  out.earliestAfterDelete = (await offsets(-2n)).offset.toString()

  const group = `${prefix}-admin-group`
  await a.alterConsumerGroupOffsets({ groupId: group, topics: [{ name: topic,
    partitionOffsets: [{ partition: 0, offset: 3n }, { partition: 1, offset: 0n }] }] })
  const groupOffsets = async () => (await a.listConsumerGroupOffsets({ groups: [group] }))[0].topics
    .flatMap((t) => t.partitions.map((x) => [t.name, x.partitionIndex, x.committedOffset.toString(), x.metadata]))
    .sort((x, y) => x[1] - y[1])
  out.groupOffsets = await groupOffsets()
  out.listedGroup = plain((await a.listGroups()).get(group))
  out.describedGroup = plain((await a.describeGroups({ groups: [group] })).get(group))
  await a.deleteConsumerGroupOffsets({ groupId: group, topics: [{ name: topic, partitionIndexes: [1] }] })
  out.groupOffsetsAfterDelete = await groupOffsets()
  await a.deleteGroups({ groups: [group] })
  out.groupsAfterDelete = [...(await a.listGroups()).keys()].filter((g) => g === group)
  await a.deleteTopics({ topics: [topic] })
  out.topicsAfterDelete = (await a.listTopics()).filter((t) => t === topic)
  await a.close()
  return out
}

async function produce () {
  const topic = `${prefix}-produce`
  const a = new Admin({ clientId: `${prefix}-admin`, bootstrapBrokers: brokers })
  await a.createTopics({ topics: [topic], partitions: 3, replicas: 1 })
  await a.close()
  const sent = []
  let n = 0
  for (const acks of [0, 1, -1]) {
    for (const compression of ['none', 'gzip', 'snappy', 'lz4']) {
      const p = new Producer({ clientId: `${prefix}-p`, bootstrapBrokers: brokers, serializers: stringSerializers, acks, compression })
      const messages = [0, 1, 2].map((i) => ({ topic, partition: 0, key: `k${n}-${i}`,
        value: `${compression}-${acks}-${i}-`.repeat(20 * (i + 1)), headers: { h: `x${i}`, empty: '' },
        timestamp: base + BigInt(n * 10 + i) }))
      const result = await p.send({ messages })
      sent.push({ acks, compression, offsets: acks === 0 ? null : plain(result.offsets) })
      n++
      await p.close()
    }
  }
  const idempotent = new Producer({ clientId: `${prefix}-idem`, bootstrapBrokers: brokers, serializers: stringSerializers, idempotent: true })
  for (let i = 0; i < 3; i++) {
    const result = await idempotent.send({ messages: [{ topic, partition: 1, key: `i${i}`, value: `idempotent-${i}`,
      timestamp: base + BigInt(i) }, { topic, partition: 2, key: null, value: `other-${i}`, timestamp: base + BigInt(i) }] })
    sent.push({ idempotent: i, offsets: plain(result.offsets).sort((x, y) => x.partition - y.partition) })
  }
  await idempotent.send({ messages: [{ topic, partition: 2, key: 'tombstone', value: undefined, timestamp: base + 9n }] })
  await idempotent.close()
  return { sent, records: await readAll([topic], 12 * 3 + 3 + 3 + 1) }
}

async function groups () {
  const topic = `${prefix}-groups`
  const group = `${prefix}-group`
  const a = new Admin({ clientId: `${prefix}-admin`, bootstrapBrokers: brokers })
  await a.createTopics({ topics: [topic], partitions: 4, replicas: 1 })
  const p = new Producer({ clientId: `${prefix}-p`, bootstrapBrokers: brokers, serializers: stringSerializers })
  for (let part = 0; part < 4; part++) {
    await p.send({ messages: [0, 1, 2, 3, 4].map((i) => ({ topic, partition: part, key: `k${part}-${i}`,
      value: `v${part}-${i}`, timestamp: base + BigInt(part * 100 + i) })) })
  }
  const out = {}
  const got = { a: [], b: [] }
  const first = consumer(group)
  const firstStream = await first.consume({ topics: [topic], mode: 'committed', fallbackMode: 'earliest', autocommit: false })
  firstStream.on('data', (m) => got.a.push(recordOf(m)))
  await until('the first member\'s records', () => got.a.length >= 20)
  out.firstMember = got.a.map((r) => `${r.partition}:${r.offset}:${r.key}:${r.value}:${r.timestamp}`).sort()
  out.firstAssignment = plain(first.assignments)
  await first.commit({ offsets: [0, 1, 2, 3].map((partition) => ({ topic, partition, offset: 2n, leaderEpoch: 0 })) })
  out.committed = plain(await first.listCommittedOffsets({ topics: [{ topic, partitions: [0, 1, 2, 3] }] }))
  out.lag = plain(await first.getLag({ topics: [topic] }))
  const second = consumer(group)
  const secondStream = await second.consume({ topics: [topic], mode: 'committed', fallbackMode: 'earliest', autocommit: false })
  secondStream.on('data', (m) => got.b.push(recordOf(m)))
  const split = () => first.assignments && second.assignments && first.generationId === second.generationId &&
    first.assignments.reduce((s, x) => s + x.partitions.length, 0) === 2 &&
    second.assignments.reduce((s, x) => s + x.partitions.length, 0) === 2
  await until('the rebalance to two members', split)
  out.split = { first: plain(first.assignments), second: plain(second.assignments) }
  await until('the second member\'s records', () => got.b.length >= 6)
  await sleep(500)
  out.secondMember = got.b.map((r) => `${r.partition}:${r.offset}`).sort()
  const described = (await a.describeGroups({ groups: [group] })).get(group)
  out.described = { state: described.state, protocolType: described.protocolType, protocol: described.protocol,
    members: [...described.members.values()].map((m) => [...m.assignments.values()].map((x) => x.partitions.length)[0]).sort() }
  secondStream.pause()
  const before = got.b.length
  const paused = second.assignments[0].partitions
  await p.send({ messages: paused.map((partition) => ({ topic, partition, value: `late-${partition}` })) })
  await sleep(1500)
  out.whilePaused = got.b.length - before
  secondStream.resume()
  await until('records after resume', () => got.b.length - before >= paused.length)
  out.afterResume = got.b.slice(before).map((r) => r.value).sort()
  await secondStream.close()
  await second.close()
  await until('the rebalance back to one member', () =>
    first.assignments && first.assignments.reduce((s, x) => s + x.partitions.length, 0) === 4)
  out.afterLeave = plain(first.assignments)
  await firstStream.close()
  await first.close()
  out.describedEmpty = (await a.describeGroups({ groups: [group] })).get(group).state
  await p.close()
  await a.close()
  return out
}

async function transactions () {
  const topic = `${prefix}-txn`
  const out = `${prefix}-txn-out`
  const a = new Admin({ clientId: `${prefix}-admin`, bootstrapBrokers: brokers })
  await a.createTopics({ topics: [topic, out], partitions: 2, replicas: 1 })
  const p = new Producer({ clientId: `${prefix}-tp`, bootstrapBrokers: brokers, serializers: stringSerializers,
    transactionalId: `${prefix}-tx`, idempotent: true, acks: -1, retries: 10, retryDelay: 500 })
  const result = {}
  const send = async (messages, commit) => {
    const t = await p.beginTransaction()
    await t.send({ messages })
    if (commit) await t.commit(); else await t.abort()
  }
  await send([{ topic, partition: 0, key: 'a', value: 'committed-1' }, { topic, partition: 1, key: 'b', value: 'committed-2' }], true)
  await send([{ topic, partition: 0, key: 'c', value: 'aborted' }], false)
  await send([{ topic, partition: 0, key: 'd', value: 'committed-3' }], true)
  const open = await p.beginTransaction()
  await open.send({ messages: [{ topic, partition: 1, key: 'e', value: 'pending' }] })
  const lister = consumer(`${prefix}-lister`)
  result.endOffsets = plain(await lister.listOffsets({ topics: [topic], isolationLevel: 0 }))
  result.stableOffsets = plain(await lister.listOffsets({ topics: [topic], isolationLevel: 1 }))
  await lister.close()
  const values = (records) => records.map((r) => `${r.partition}:${r.offset}:${r.value}`)
  result.readCommittedWhileOpen = values(await readAll([topic], 3, { isolationLevel: 1 }))
  result.readUncommittedWhileOpen = values(await readAll([topic], 5, { isolationLevel: 0 }))
  await open.commit()
  result.readCommittedAfter = values(await readAll([topic], 4, { isolationLevel: 1 }))
  // consume-transform-produce: each record's output and its offset in one transaction
  const group = `${prefix}-ctp`
  const c = consumer(group, { isolationLevel: 1 })
  const stream = await c.consume({ topics: [topic], mode: 'earliest', autocommit: false, isolationLevel: 1 })
  let done = 0
  for await (const m of stream) {
    const t = await p.beginTransaction()
    await t.addConsumer(c)
    await t.send({ messages: [{ topic: out, partition: m.partition, key: m.key, value: `x-${m.value}` }] })
    await t.addOffset(m)
    await t.commit()
    if (++done >= 4) break
  }
  await stream.close()
  await c.close()
  result.ctpCommitted = plain(await a.listConsumerGroupOffsets({ groups: [group] }))[0].topics[0].partitions
    .map((x) => [x.partitionIndex, x.committedOffset]).sort()
  result.ctpOutput = values(await readAll([out], 4, { isolationLevel: 1 }))
  await p.close()
  await a.close()
  return result
}

// The KIP-848 protocol (ConsumerGroupHeartbeat): two members share a topic's partitions
async function consumerProtocol () {
  const a = new Admin({ clientId: `${prefix}-admin`, bootstrapBrokers: brokers })
  if (!(await a.listApis()).some((api) => api.apiKey === 68)) {
    await a.close()
    return { skipped: 'the broker does not advertise ConsumerGroupHeartbeat' }
  }
  const topic = `${prefix}-848`
  await a.createTopics({ topics: [topic], partitions: 4, replicas: 1 })
  const p = new Producer({ clientId: `${prefix}-p`, bootstrapBrokers: brokers, serializers: stringSerializers })
  await p.send({ messages: [0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ topic, partition: i % 4, value: `v${i}` })) })
  const out = {}
  const next = `${prefix}-group-848`
  const members = [consumer(next, { groupProtocol: 'consumer' }), consumer(next, { groupProtocol: 'consumer' })]
  const got = [[], []]
  const streams = []
  for (const [i, member] of members.entries()) {
    let stream
    try {
      stream = await member.consume({ topics: [topic], mode: 'earliest', autocommit: false })
    } catch (e) {   // Kafka 3.9 advertises the API but answers so unless the protocol is enabled
      if (!(e.errors ?? []).some((x) => x.apiId === 'UNSUPPORTED_VERSION')) throw e
      for (const m of members) await m.close(true)
      await p.close()
      await a.close()
      return { skipped: 'the broker refuses ConsumerGroupHeartbeat (UNSUPPORTED_VERSION)' }
    }
    stream.on('data', (m) => got[i].push(`${m.partition}:${m.value}`))
    streams.push(stream)
  }
  const owned = (member) => (member.assignments ?? []).reduce((s, x) => s + x.partitions.length, 0)
  await until('the KIP-848 group split', () => owned(members[0]) === 2 && owned(members[1]) === 2)
  await until('the KIP-848 group\'s records', () => got[0].length + got[1].length >= 8)
  await sleep(500)
  out.owned = members.map(owned)
  // a partition that moved mid-read is read again; a produce retried after a timeout may repeat
  out.records = [...new Set(got.flat())].sort()
  out.listed = plain((await a.listGroups({ types: ['consumer'] })).get(next))
  for (const stream of streams) await stream.close()
  for (const member of members) await member.close()
  await p.close()
  await a.close()
  return out
}

const scenarios = { admin, produce, groups, transactions, consumer_protocol: consumerProtocol }
try {
  const result = await scenarios[scenario]()
  process.stdout.write(JSON.stringify({ ok: true, result }) + '\n')
  process.exit(0)
} catch (e) {
  const errors = (e.errors ?? []).map((x) => `${x.apiId ?? x.code}: ${x.message}`)
  process.stdout.write(JSON.stringify({ ok: false, error: `${e.name}: ${e.message}`, errors, stack: e.stack }) + '\n')
  process.exit(1)
}
