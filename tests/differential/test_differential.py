"""Differential check: the recorded golden request frames (real clients' conversations with Kafka)
replayed against the reference Apache Kafka 3.9 and against Odradek, the decoded responses compared
field by field (compare.py holds the allow-list of fields that legitimately differ).

Also every API and version both advertise, sent with its emptiest body (sweep.py), and request shapes
clients and tools send, asked after building the same topics, records, transactions and groups on both
(scenarios.py). Differences left are decisions, listed with the reason; anything else fails. The
default run replays two clients' conversations; all four, the sweep and the scenarios with `-m slow`,
or by command:

    python -m tests.differential.replay KAFKA_HOST:PORT ODRADEK_HOST:PORT
    python -m tests.differential.sweep KAFKA_HOST:PORT ODRADEK_HOST:PORT
    python -m tests.differential.scenarios KAFKA_HOST:PORT ODRADEK_HOST:PORT [scenario ...]
"""

from __future__ import annotations

import re
import uuid

import pytest

from broker.testing import running_broker
from tests import apache_kafka as oracle
from tests.differential.replay import GOLDEN, compare_replays, load_requests, replay
from tests.differential.scenarios import SCENARIOS, compare, run

apache_kafka = oracle.apache_kafka   # the session fixture

# Differences that are decisions, not bugs: {pattern on the difference line: why}.
DECISIONS = {
    "* CreateTopics v* .topics[0].configs: 36 entries != 33":
        "Kafka 3.9 still lists message.format.version, message.downconversion.enable and "
        "message.timestamp.difference.max.ms, which Kafka 4.0 removed (Odradek is a 4.x broker)",
    "* DescribeConfigs v* .results[0].configs: 36 entries != 33": "the same three 3.9-only topic configs",
    "* WriteTxnMarkers v1: connection closed by Odradek only":
        "single node: no inter-broker WriteTxnMarkers (not advertised; an unadvertised API closes the "
        "connection, as Kafka does)",
    "* ConsumerGroupDescribe v0 .groups[0].error_code: 35 != 69":
        "Kafka 3.9 serves the KIP-848 protocol only with group.coordinator.rebalance.protocols naming "
        "consumer (4.0's default, Odradek's): UNSUPPORTED_VERSION there, GROUP_ID_NOT_FOUND here",
    "* ListGroups v* .groups: * entries != *":
        "Kafka keeps a group left empty without offsets (e.g. after MEMBER_ID_REQUIRED) until its "
        "offsets-retention check, up to 10 minutes; Odradek forgets it at once",
    "* DescribeGroups v* .groups[0].group_state: 'Empty' != 'Dead'": "the same empty-group retention",
    "* OffsetCommit v* .topics[0].partitions[0].error_code: 25 != 22": "the same: Kafka's retained empty group knows no member "
                                               "(UNKNOWN_MEMBER_ID), Odradek has no group (ILLEGAL_GENERATION)",
}


def _pattern(text: str) -> re.Pattern:
    """A DECISIONS key: literal text where * matches anything."""
    return re.compile(".*".join(re.escape(part) for part in text.split("*")) + "$")


_DECIDED = [_pattern(p) for p in DECISIONS]


def _unexplained(found: list[str]) -> list[str]:
    return [line for line in found if not any(p.match(line) for p in _DECIDED)]


@pytest.fixture(scope="module")
def odradek(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("differential") / "data",
                        {"group.initial.rebalance.delay.ms": "0"}) as running:
        yield running


def _check(client: str, kafka, odradek) -> None:
    frames = load_requests(GOLDEN / f"{client}.jsonl")
    found = compare_replays(replay(frames, ("127.0.0.1", kafka.port)),
                            replay(frames, ("127.0.0.1", odradek.port)))
    assert _unexplained(found) == []


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_golden_conversations_answer_as_kafka(apache_kafka, odradek, client):
    _check(client, apache_kafka, odradek)


@pytest.mark.slow
@pytest.mark.parametrize("client", ["confluent-kafka", "java"])
def test_golden_conversations_answer_as_kafka_all_clients(apache_kafka, odradek, client):
    _check(client, apache_kafka, odradek)


# ------------------------------------------------------------------------ every API, emptiest bodies

# Sweep differences that are decisions or broker state (the session's Kafka has other tests' topics).
SWEEP_DECISIONS = {
    "Metadata v* .topics*": "all-topics answers: each broker holds other tests' topics",
    "DescribeLogDirs v* .results[0].log_dir: *": "each broker's own log dir",
    "DescribeLogDirs v* .results[0].topics*": "state: each broker holds other tests' topics (and its "
                                              "own number of __consumer_offsets partitions)",
    "DescribeLogDirs v* .results[0].total_bytes: *": "each broker's own disk",
    "DescribeLogDirs v* .results[0].usable_bytes: *": "each broker's own disk",
    "ListTransactions v* .transaction_states: * entries != *": "state: other tests' transactions",
    "DescribeTopicPartitions v* .next_cursor.*":
        "all topics, one partition at most: where the cursor lands depends on each broker's topics and "
        "its __consumer_offsets partition count (1 in tests, 50 in Kafka's default)",
    "OffsetFetch v8*: connection closed by Kafka only":
        "an OffsetFetch v8+ without groups: Kafka fails on it and closes; Odradek answers an empty list",
    "OffsetFetch v9*: connection closed by Kafka only": "the same",
    "AddPartitionsToTxn v4*: connection closed by Kafka only":
        "v4+ is the inter-broker form (KIP-890): Kafka refuses an empty one by closing, Odradek answers",
    "AddPartitionsToTxn v5*: connection closed by Kafka only": "the same",
    "ConsumerGroupHeartbeat v0* .error_code: 35 != 42":
        "Kafka 3.9 serves the KIP-848 protocol only with group.coordinator.rebalance.protocols naming "
        "consumer (4.0's default, Odradek's): its empty heartbeat is UNSUPPORTED_VERSION, ours INVALID_REQUEST "
        "(as 3.9's with the protocol on: scenarios_kip848.py)",
    "ElectLeaders v* nulls .error_code: 7 != 0":
        "an election of every partition with timeout 0: Kafka times out (REQUEST_TIMED_OUT); a single "
        "node has nothing to wait for",
    "ElectLeaders v* nulls .replica_election_results: 0 entries != *":
        "the same timeout: Kafka's timed-out answer lists nothing; Odradek's completed election of every "
        "partition lists each topic with the partitions that needed an election (none here), as Kafka "
        "answers when its controller completes in time",
}
_SWEEP_DECIDED = [_pattern(p) for p in SWEEP_DECISIONS]


@pytest.mark.slow   # about two minutes: ~300 requests to each broker
def test_every_api_with_its_emptiest_body_answers_as_kafka(apache_kafka, odradek):
    from tests.differential.sweep import advertised, cases, compare_case, warm_up

    kafka, ours = ("127.0.0.1", apache_kafka.port), ("127.0.0.1", odradek.port)
    warm_up(kafka)
    warm_up(ours)
    found = []
    for key, version, nulls in cases(advertised(kafka), advertised(ours)):
        found += compare_case(kafka, ours, key, version, nulls)
    assert [line for line in found if not any(p.match(line) for p in _SWEEP_DECIDED)] == []


# ------------------------------------------------------------------ request shapes on built-up state

SCENARIO_DECISIONS = {
    "incremental_alter_configs [unknown operation] .responses[0].error_code: -1 != 42":
        "an operation id beyond SUBTRACT: Kafka fails inside (UNKNOWN_SERVER_ERROR, no message); "
        "Odradek names it INVALID_REQUEST with the reason",
    "topic_ids [metadata zero id, no name v12] *":
        "a Metadata v12 topic with neither name nor id: Kafka fails the whole request inside "
        "(UNKNOWN_SERVER_ERROR, no brokers); Odradek answers UNKNOWN_TOPIC_ID (v10 both INVALID_REQUEST)",
    "create_topics_shapes [*] .topics[0].configs: 36 entries != 33":
        "the three 3.9-only topic configs (as in the golden conversations above)",
    "topic_names [*] .topics[0].configs: 36 entries != 33": "the three 3.9-only topic configs (as above)",
    "topic_names [twins * .topics[1].*":
        "'a.b' and 'a_b' (whose metric names collide) in one CreateTopics: Kafka checks collisions "
        "only against topics that already exist and creates both; Odradek refuses the second "
        "(INVALID_TOPIC_EXCEPTION), as Kafka refuses it one request later",
    "produce_shapes [*] .record_errors[0].batch_index_error_message: *":
        "the bounds are wall-clock times, and Kafka 3.9's upper one overflows its default "
        "message.timestamp.after.max.ms (Long.MAX_VALUE); Kafka 4.0 made that default one hour, as Odradek",
    "produce_malformed [from the future] .record_errors[0].batch_index_error_message: *":
        "the same wall-clock bounds as produce_shapes' (Kafka 3.9's lower one overflows)",
    "transactional_produce_errors [gap: sequence 3 first] *":
        "a transaction's first batch whose sequence skips one that failed verification: Kafka 3.9 "
        "remembers the lowest sequence it verified and refuses it (OUT_OF_ORDER_SEQUENCE_NUMBER); "
        "Odradek appends it, as Kafka does when no verification failed first (not adopted yet)",
    "transactional_produce_errors [future: epoch] *":
        "a transactional batch at an epoch the coordinator never gave, while the producer's transaction "
        "is open on the partition: Kafka 3.9 skips verification and appends it (bumping the partition's "
        "epoch); Odradek asks the coordinator, which refuses it (INVALID_PRODUCER_EPOCH)",
    "produce_shapes [a partition twice] *":
        "a Produce naming one partition twice (no client does): Kafka keeps the last copy, Odradek "
        "appends both; not worth a per-request check on the hot path",
    "produce_shapes [end offsets] .topics[0].partitions[0].offset: *": "the same partition named twice",
    "consumer_reads [metadata __*] .topics[0].partitions: 50 entries != 1":
        "configuration: the test broker has one partition of each internal topic",
    "configs_views [topic documentation] *":
        "documentation is each broker's own text (Odradek's own words, never Kafka's copied)",
    "configs_views [broker logger] .results[0].configs: 1 entries != 0":
        "logger names are each broker's own (Kafka's log4j class names are not Odradek's loggers)",
    "client_quotas [entity twice] .entries[0].entity: 1 entries != 2":
        "an AlterClientQuotas entity naming a type twice (refused by both): Kafka echoes the entity as "
        "the map it parsed, Odradek as sent; clients read it as a map either way",
}
_SCENARIO_DECIDED = [_pattern(p) for p in SCENARIO_DECISIONS]


@pytest.mark.slow   # about a minute: each scenario builds its state on both brokers
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_request_shapes_on_built_up_state_answer_as_kafka(apache_kafka, odradek, scenario):
    prefix = f"dx{uuid.uuid4().hex[:8]}"
    found = compare(run(("127.0.0.1", apache_kafka.port), scenario, prefix),
                    run(("127.0.0.1", odradek.port), scenario, prefix), scenario)
    assert [line for line in found if not any(p.match(line) for p in _SCENARIO_DECIDED)] == []
