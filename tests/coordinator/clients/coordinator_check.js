// Drives KafkaJS (its own assignor, InitProducerId v0, its transaction code) through the coordinator
// scenarios; prints one JSON object for tests/coordinator/test_clients_kafkajs.py to check.
const path = require('path');
const { Kafka, logLevel } = require(path.resolve(process.argv[3], 'kafkajs'));

async function main(bootstrap) {
  const kafka = new Kafka({ clientId: 'coordinator-check', brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: 'kjs', numPartitions: 2 }] });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  await producer.send({ topic: 'kjs', messages: Array.from({ length: 10 }, (_, i) => ({ value: 'v' + i, partition: i % 2 })) });
  const tx = kafka.producer({ transactionalId: 'kjs-tx', idempotent: true, maxInFlightRequests: 1 });
  await tx.connect();
  let t = await tx.transaction();
  await t.send({ topic: 'kjs', messages: [{ value: 'committed', partition: 0 }] });
  await t.commit();
  t = await tx.transaction();
  await t.send({ topic: 'kjs', messages: [{ value: 'aborted', partition: 0 }] });
  await t.abort();
  t = await tx.transaction();
  await t.sendOffsets({ consumerGroupId: 'kjs-offsets', topics: [{ topic: 'kjs', partitions: [{ partition: 1, offset: '3' }] }] });
  await t.commit();

  const consumer = kafka.consumer({ groupId: 'kjs-group', heartbeatInterval: 300, maxWaitTimeInMs: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic: 'kjs', fromBeginning: true });
  const seen = [];
  let timer;
  await new Promise((resolve) => {
    consumer.run({ eachMessage: async ({ message }) => { seen.push(message.value.toString()); if (seen.length >= 11) resolve(); } });
    timer = setTimeout(resolve, 20000);
  });
  clearTimeout(timer);
  await consumer.commitOffsets([{ topic: 'kjs', partition: 1, offset: '5' }]);
  const described = await admin.describeGroups(['kjs-group']);
  await consumer.disconnect();
  const result = {
    seen: seen.sort(),
    members: described.groups[0].members.length,
    committed: (await admin.fetchOffsets({ groupId: 'kjs-group', topics: ['kjs'] }))[0].partitions
      .map(p => [p.partition, p.offset]).sort(),
    txnOffsets: (await admin.fetchOffsets({ groupId: 'kjs-offsets', topics: ['kjs'] }))[0].partitions
      .map(p => [p.partition, p.offset]).sort(),
  };
  await tx.disconnect();
  await producer.disconnect();
  await admin.disconnect();
  console.log(JSON.stringify(result));
}

main(process.argv[2]).catch((e) => { console.error(e); process.exit(1); });
