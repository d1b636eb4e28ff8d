'use strict';
// kafka-node 5.0.0 and no-kafka 3.4: two JavaScript clients that implement the protocol themselves on
// old API versions (Produce v1-v2 with message format v0/v1, Fetch v0-v2, ListOffsets v0, Metadata
// v0-v1, JoinGroup/SyncGroup/Heartbeat v0, OffsetCommit v0-v2, OffsetFetch v0-v1, CreateTopics v1,
// DescribeConfigs v0-v2), with their own group assignment code.
// Usage: node old_js_clients.js BOOTSTRAP SCENARIO PREFIX
// Prints one JSON line {ok, result | error}; compat-tests/test_13_old_js_clients.py makes the assertions.
const kafka = require('kafka-node');
const NoKafka = require('no-kafka');

const [bootstrap, scenario, prefix] = process.argv.slice(2);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const topicName = (s) => `${prefix}-${s}`;
const errorText = (e) => (e ? `${e.name || e.code || ''}:${e.message || e}` : null);
// node-style callback -> promise of the answer, or {error} when the call failed
const settle = (call) => new Promise((resolve) => call((e, data) => resolve(e ? { error: errorText(e) } : data)));
// prefixes stripped, so that answers read the same whatever the run's prefix
const plain = (value) => (value === undefined ? null : JSON.parse(JSON.stringify(value).split(`${prefix}-`).join('')));

async function until (what, condition, ms = 20000) {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function kafkaNodeClient () {
  const client = new kafka.KafkaClient({ kafkaHost: bootstrap, requestTimeout: 10000 });
  if (!client.ready) await new Promise((resolve, reject) => { client.once('ready', resolve); client.once('error', reject); });
  return client;
}
async function producerOf (client, options) {
  const producer = new kafka.Producer(client, options);
  if (!producer.ready) await new Promise((resolve) => producer.once('ready', resolve));
  return producer;
}
const closed = (closable, ...args) => new Promise((resolve) => closable.close(...args, resolve));

// kafka-node's simple Consumer from offset 0 of each partition: "partition:offset:key:value"
async function kafkaNodeRead (topic, partitions, count, fetchMaxBytes = 1024 * 1024) {
  const client = await kafkaNodeClient();
  const consumer = new kafka.Consumer(client, partitions.map((partition) => ({ topic, partition, offset: 0 })),
    { autoCommit: false, fromOffset: true, fetchMaxWaitMs: 100, fetchMaxBytes });
  const got = [];
  consumer.on('message', (m) => got.push(`${m.partition}:${m.offset}:${m.key}:${m.value}`));
  consumer.on('error', (e) => got.push(`error ${errorText(e)}`));
  const end = Date.now() + 8000;
  while (got.length < count && Date.now() < end) await sleep(50);
  await sleep(count ? 300 : 1500);   // anything more shows up as a failure
  await closed(consumer, true);
  await closed(client);
  return got.sort();
}

function groupMember (groupId, topic, protocol) {
  const member = new kafka.ConsumerGroup({
    kafkaHost: bootstrap, groupId, protocol: [protocol], fromOffset: 'earliest', sessionTimeout: 10000,
    autoCommit: false, fetchMaxWaitMs: 100, heartbeatInterval: 300
  }, [topic]);
  member.got = [];
  member.errors = [];
  member.on('message', (m) => member.got.push(`${m.partition}:${m.offset}:${m.value}`));
  member.on('error', (e) => member.errors.push(errorText(e)));
  return member;
}
// CreateTopics returns before the broker knows the topic's leaders (in Kafka as here): wait for them
async function createTopic (client, topic, partitions, configEntries = []) {
  const answer = await settle((cb) => new kafka.Admin(client).createTopics([{ topic, partitions, replicationFactor: 1, configEntries }], cb));
  await refreshUntilKnown(client, topic, partitions);
  return answer;
}
async function refreshUntilKnown (client, topic, partitions) {
  for (let i = 0; i < 40; i++) {
    const meta = await settle((cb) => client.loadMetadataForTopics([topic], cb));
    const known = !meta.error && meta[1].metadata[topic];
    if (known && Object.keys(known).length === partitions && Object.values(known).every((p) => p.leader >= 0)) {
      client.updateMetadatas(meta);
      return;
    }
    await sleep(100);
  }
  throw new Error(`no leaders for ${topic}`);
}
// kafka-node's Producer does not retry: a just-created partition may not take writes yet
async function sent (producer, payloads) {
  for (let attempt = 0; ; attempt++) {
    const answer = await settle((cb) => producer.send(payloads, cb));
    if (!answer.error || attempt === 30) return answer;
    await sleep(100);
  }
}
const owned = (member) => (member.topicPayloads || []).map((p) => p.partition).sort();

async function kafkaNode () {
  const out = {};
  const client = await kafkaNodeClient();
  const admin = new kafka.Admin(client);
  const topic = topicName('kn');
  out.created = await createTopic(client, topic, 3, [{ name: 'retention.ms', value: '3600000' }]);
  out.duplicate = await settle((cb) => admin.createTopics([{ topic, partitions: 1, replicationFactor: 1 }], cb));
  const configs = await settle((cb) => admin.describeConfigs({ resources: [{ resourceType: admin.RESOURCE_TYPES.topic, resourceName: topic, configNames: ['retention.ms', 'cleanup.policy'] }], includeSynonyms: false }, cb));
  out.configs = configs.error ? configs : Object.fromEntries(configs[0].configEntries.map((e) => [e.configName, [e.configValue, e.configSource]]));

  // the cyclic partitioner over the three partitions, none/gzip/snappy message sets (attributes 0/1/2)
  const cyclic = await producerOf(client, { requireAcks: 1, partitionerType: 2 });
  out.produced = [];
  for (const attributes of [0, 1, 2]) {
    const messages = [0, 1].map((i) => new kafka.KeyedMessage(`k${attributes}${i}`, `v${attributes}${i}`));
    out.produced.push(plain(await sent(cyclic, [{ topic, messages, attributes }])));
  }
  // the keyed partitioner: the same key always to the same partition
  const keyed = await producerOf(client, { requireAcks: -1, partitionerType: 3 });
  for (const key of ['a', 'b', 'a']) {
    out.produced.push(plain(await sent(keyed, [{ topic, key, messages: [new kafka.KeyedMessage(key, `keyed-${key}`)], attributes: 1 }])));
  }
  out.read = await kafkaNodeRead(topic, [0, 1, 2], 9);
  // Fetch v2 predates KIP-74: a batch larger than the partition's fetchMaxBytes is not sent at all
  out.readTooSmall = await kafkaNodeRead(topic, [0], 0, 50);

  const offset = new kafka.Offset(client);
  out.latest = await settle((cb) => offset.fetchLatestOffsets([topic], cb));
  out.earliest = await settle((cb) => offset.fetchEarliestOffsets([topic], cb));
  // a missing topic: the Metadata request auto-creates it but answers it unknown (so: "does not exist"),
  // the next one finds it
  const missing = topicName('kn-auto');
  out.latestOfMissing = await settle((cb) => offset.fetchLatestOffsets([missing], cb));
  await sleep(1000);
  out.latestOfMissingLater = await settle((cb) => offset.fetchLatestOffsets([missing], cb));
  await closed(client);
  return plain(out);
}

async function kafkaNodeGroups () {
  const out = {};
  const client = await kafkaNodeClient();
  const admin = new kafka.Admin(client);
  const topic = topicName('kng');
  await createTopic(client, topic, 4);
  const producer = await producerOf(client, { requireAcks: 1 });
  out.produced = [];
  for (let p = 0; p < 4; p++) {
    out.produced.push(await sent(producer, [{ topic, partition: p, messages: [0, 1, 2, 3].map((i) => `v${p}-${i}`), attributes: p % 2 }]));
  }
  const groupId = topicName('kn-group');
  const first = groupMember(groupId, topic, 'roundrobin');
  await until('16 records', () => first.got.length >= 16);
  out.firstRead = first.got.slice().sort();
  out.firstOwned = owned(first);
  const generation = first.generationId;
  // ConsumerGroup commits with OffsetCommit v2, Offset.fetchCommits reads with OffsetFetch v1
  out.commit = await settle((cb) => first.sendOffsetCommitRequest([0, 1, 2, 3].map((partition) => ({ topic, partition, offset: 2, metadata: 'm' })), cb));
  out.committed = await settle((cb) => new kafka.Offset(client).fetchCommits(groupId, [0, 1, 2, 3].map((partition) => ({ topic, partition })), cb));
  // a second member joins the running group: a rebalance splits the partitions
  const second = groupMember(groupId, topic, 'roundrobin');
  await until('the rebalance', () => second.generationId === first.generationId && first.generationId > generation &&
    owned(first).length + owned(second).length === 4 && owned(second).length > 0);
  out.split = [owned(first), owned(second)].sort();
  await until('the second member reading', () => second.got.length >= 4);
  await sleep(300);
  // it starts where the group committed (offset 2)
  out.secondRead = second.got.map((r) => r.split(':').slice(0, 2).join(':')).sort();
  out.secondOwned = owned(second);
  const described = await settle((cb) => admin.describeGroups([groupId], cb));
  const group = described[groupId] || described;
  out.described = group.error ? group : {
    state: group.state, protocolType: group.protocolType, protocol: group.protocol,
    assignments: group.members.map((m) => m.memberAssignment.partitions[topic].sort()).sort()
  };
  const listed = await settle((cb) => admin.listGroups(cb));
  out.listed = listed.error ? listed : listed[groupId];
  await closed(second);
  await until('the first member owning every partition again', () => owned(first).length === 4);
  out.afterLeave = owned(first);
  await closed(first);
  const empty = await settle((cb) => admin.describeGroups([groupId], cb));
  out.describedEmpty = empty[groupId] ? [empty[groupId].state, empty[groupId].members.length] : empty;
  out.errors = [...first.errors, ...second.errors];
  await closed(client);
  return plain(out);
}

function noKafkaOptions (extra = {}) {
  return { connectionString: bootstrap, logger: { logLevel: 0 }, idleTimeout: 100, maxWaitTime: 100, ...extra };
}
const noKafkaRecord = (partition, m) => `${partition}:${m.offset}:${m.message.key}:${m.message.value}`;
const answered = (promise) => promise.then((value) => value, (e) => ({ error: errorText(e) }));

async function noKafka () {
  const out = {};
  const topic = topicName('nk');
  const setup = await kafkaNodeClient();
  await createTopic(setup, topic, 2);
  await closed(setup);
  // Produce v1: message format v0, one compressed message set per partition
  const producer = new NoKafka.Producer(noKafkaOptions({ batch: { size: 0, maxWait: 0 } }));
  await producer.init();
  out.produced = [];
  for (const [partition, codec] of [[0, NoKafka.COMPRESSION_NONE], [0, NoKafka.COMPRESSION_GZIP], [1, NoKafka.COMPRESSION_SNAPPY], [1, NoKafka.COMPRESSION_NONE]]) {
    const sent = await answered(producer.send([0, 1].map((i) => ({ topic, partition, message: { key: `k${codec}${i}`, value: `c${codec}-${i}` } })), { codec }));
    out.produced.push(sent.error || sent.map((r) => `${r.partition}@${r.offset}`));
  }
  // SimpleConsumer: Fetch v0, ListOffsets v0, OffsetCommit/OffsetFetch v0 (ZooKeeper-only: refused)
  const simple = new NoKafka.SimpleConsumer(noKafkaOptions({ groupId: topicName('nk-simple') }));
  await simple.init();
  out.offsets = [await simple.offset(topic, 0), await simple.offset(topic, 1, NoKafka.EARLIEST_OFFSET)];
  const commitV0 = await answered(simple.commitOffset([{ topic, partition: 0, offset: 1 }]));
  out.commitV0 = commitV0.error || commitV0.map((r) => errorText(r.error));
  const read = [];
  await simple.subscribe(topic, [0, 1], { offset: 0 }, (set, _, partition) => { for (const m of set) read.push(noKafkaRecord(partition, m)); });
  await until('8 records', () => read.length >= 8);
  await sleep(300);
  out.read = read.sort();
  await simple.end();

  // GroupConsumer: JoinGroup/SyncGroup/Heartbeat v0, OffsetCommit v2 and OffsetFetch v1
  const groupId = topicName('nk-group');
  const groupRead = [];
  const member = new NoKafka.GroupConsumer(noKafkaOptions({ groupId, startingOffset: NoKafka.EARLIEST_OFFSET, sessionTimeout: 10000, heartbeatTimeout: 300 }));
  await member.init([{ subscriptions: [topic], handler: (set, _, partition) => { for (const m of set) groupRead.push(noKafkaRecord(partition, m)); } }]);
  await until('the group reading 8 records', () => groupRead.length >= 8);
  out.groupRead = groupRead.sort();
  const commit = await answered(member.commitOffset([0, 1].map((partition) => ({ topic, partition, offset: 2, metadata: 'meta' }))));
  out.commit = commit.error || commit.map((r) => `${r.partition}:${errorText(r.error)}`).sort();
  const fetched = await answered(member.fetchOffset([0, 1].map((partition) => ({ topic, partition }))));
  out.fetched = fetched.error || fetched.map((r) => `${r.partition}:${r.offset}:${r.metadata}`).sort();
  const admin = new NoKafka.GroupAdmin(noKafkaOptions());
  await admin.init();
  const group = await answered(admin.describeGroup(groupId));
  out.described = group.error ? group : {
    state: group.state, protocolType: group.protocolType, protocol: group.protocol,
    assignment: group.members.map((m) => m.memberAssignment.partitionAssignment.map((a) => a.partitions.sort()))
  };
  out.lag = (await answered(admin.fetchConsumerLag(groupId, [{ topicName: topic, partitions: [0, 1] }]))).map((l) => [l.partition, l.offset, l.highwaterMark]);
  await member.end();
  await admin.end();
  await producer.end();
  return plain(out);
}

const scenarios = { kafka_node: kafkaNode, kafka_node_groups: kafkaNodeGroups, no_kafka: noKafka };
(async () => {
  const timer = setTimeout(() => { console.log(JSON.stringify({ ok: false, error: 'scenario timed out' })); process.exit(2); }, 60000);
  try {
    console.log(JSON.stringify({ ok: true, result: await scenarios[scenario]() }));
  } catch (e) {
    console.log(JSON.stringify({ ok: false, error: errorText(e), stack: e && e.stack }));
  }
  clearTimeout(timer);
  process.exit(0);
})();
