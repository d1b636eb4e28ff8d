"""The Java Admin client (kafka-clients 4.x) against Odradek, answer by answer as against Kafka 3.9
(tests/ops/clients/AdminCheck.java prints the facts). The expected facts are Kafka 3.9's answers to
the same calls; the slow tests check them against the reference Kafka itself."""

import os
import subprocess

import pytest

from broker.testing import running_broker
from tests import apache_kafka as oracle
from tests.java_clients import JAVA, MISSING, compile_check, java_available

apache_kafka = oracle.apache_kafka   # the session fixture
HERE = os.path.dirname(os.path.abspath(__file__))

DOWN_AS_UP = ("InvalidUpdateVersionException: Invalid update version 20 for feature metadata.version. "
              "Can't downgrade the version of this feature without setting the upgrade type to either "
              "safe or unsafe downgrade.")
FEATURE_FACTS = {
    "before.finalized": "metadata.version:21-21", "before.epoch": "set",
    "update.same": "ok",
    "update.down_as_upgrade": DOWN_AS_UP,
    "update.safe_validate": "ok",
    "update.safe_too_far": "InvalidUpdateVersionException: Invalid metadata.version 16. Refusing to "
                           "perform the requested downgrade because it might delete metadata information.",
    "update.unsafe_too_far": "InvalidUpdateVersionException: Invalid metadata.version 16. Unsafe metadata "
                             "downgrade is not supported in this version.",
    "update.unknown": "InvalidUpdateVersionException: Invalid update version 1 for feature "
                      "no.such.feature. Local controller 1 does not support this feature.",
    "update.unknown_zero": "ok",
    "update.newer_as_down": "ok",
    "validated.finalized": "metadata.version:21-21",
    "update.safe": "ok",
    "after.finalized": "metadata.version:20-20", "after.epoch": "set",
}
# What each supports: Kafka 3.9 metadata.version 1-21 and kraft.version; Odradek 3.3-IV3 (7, the
# oldest Kafka 4 accepts) to 4.0-IV0 (22), and share groups.
KAFKA_SUPPORTED = "kraft.version:0-1 metadata.version:1-21"
ODRADEK_SUPPORTED = "metadata.version:7-22 share.version:0-1"


# Admin calls on one topic (5 records with timestamps on p0, a transaction on p1), a group, the
# cluster and the quorum, as kafka-clients 4.3 reports Kafka 3.9's answers (AdminCheck's sweep).
SWEEP_FACTS = {
    "offsets.empty.max": "-1@-1/none",
    "offsets.empty.ts": "-1@-1/none",
    "offsets.earliest": "0@-1/epoch",
    "offsets.latest": "5@-1/epoch",
    "offsets.max": "1@5000/epoch",
    "offsets.ts2500": "1@5000/epoch",
    "offsets.ts9999": "-1@-1/none",
    "offsets.earliest_local": "0@-1/epoch",
    "offsets.latest_tiered": "-1@-1/none",
    "producers.p0": "[epoch=0 seq=4 ts=set coordEpoch=none txnStart=OptionalLong.empty]",
    "txn.ongoing": "Ongoing coordinator=1 timeout=60000 start=set parts=[sweep-t-1] epoch=0",
    "producers.p1.ongoing": "[epoch=0 seq=0 ts=set coordEpoch=none txnStart=OptionalLong[0]]",
    "txn.list": "[sweep-txn:Ongoing]",
    "txn.list.ongoing": "1",
    "txn.list.empty": "0",
    "txn.committed": "CompleteCommit coordinator=1 timeout=60000 start=set parts=[] epoch=0",
    "producers.p1.committed": "[epoch=0 seq=0 ts=set coordEpoch=set txnStart=OptionalLong.empty]",
    "offsets.p1.latest": "2@-1/epoch",
    "fence": "pid",
    "fence.epoch": "2",
    "txn.fenced": "Empty coordinator=1 timeout=20000 start=set parts=[] epoch=2",
    "txn.unknown": "TransactionalIdNotFoundException",
    "delete.2": "2",
    "delete.100": "OffsetOutOfRangeException",
    "delete.hw": "5",
    "offsets.after_delete.earliest": "5@-1/epoch",
    "offsets.after_delete.earliest_local": "5@-1/epoch",
    "offsets.after_delete.max": "1@5000/epoch",
    "groups.all": "[sweep-g:Classic:true:Empty]",
    "groups.empty": "[sweep-g:Classic:true:Empty]",
    "groups.stable": "[]",
    "groups.classic": "[sweep-g:Classic:true:Empty]",
    "groups.consumer_type": "[]",
    "listgroups.all": "[sweep-g:Classic::Empty]",
    "listgroups.consumer": "[sweep-g:Classic::Empty]",
    "listgroups.share": "[]",
    "listgroups.classic": "[sweep-g:Classic::Empty]",
    "listgroups.protocol": "[]",
    "listgroups.empty_state": "[sweep-g:Classic::Empty]",
    "logdirs.error": "none",
    "logdirs.p0": "true lag=0 future=false",
    "logdirs.p1": "true lag=0 future=false",
    "logdirs.bytes": "totalusable",
    "replicalogdirs": "true future=null lag=0/-1",
    "replicalogdirs.missing": "null -1",
    "elect.preferred": "ElectionNotNeededException",
    "elect.unclean": "ElectionNotNeededException",
    "elect.unknown": "UnknownTopicOrPartitionException",
    "elect.all": "[]",
    "reassignments": "0",
    "reassignments.unknown": "0",
    "cluster.controller": "1",
    "cluster.nodes": "1",
    "cluster.ops": "[CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, "
                   "IDEMPOTENT_WRITE]",
    "cluster.ops.plain": "null",
    "scram.all": "0",
    "scram.users": "[]",
    "scram.unknown": "ResourceNotFoundException",
    "client_metrics": "0",
    "config_resources": "UnsupportedVersionException",
    "quorum": "leader=1 epochPositive=true hwPositive=true voter=1 dir=true leoAtHw=true fetch=true "
              "caughtUp=true observers=0",
    # edge cases: an empty partition, unknown ids, transaction filters, SCRAM credentials
    "edge.producers.empty": "[]",
    "edge.delete.empty.0": "0",
    "edge.offsets.empty.earliest_local": "0@-1/epoch",
    "edge.offsets.empty.latest_tiered": "-1@-1/none",
    "edge.fence.unknown": "0",
    "edge.txn.after_fence_unknown": "Empty coordinator=1 timeout=20000 start=none parts=[] epoch=0",
    "edge.txnlist.by_pid": "[edge-a:Ongoing]",
    "edge.txnlist.by_other_pid": "[]",
    "edge.txnlist.duration_short": "[edge-a:Ongoing, edge-fresh:Empty]",
    "edge.txnlist.duration_long": "[edge-fresh:Empty]",
    "edge.txnlist.pattern": "UnsupportedVersionException",
    "edge.producers.ongoing_state": "ok",
    "edge.txn.aborted": "CompleteAbort coordinator=1 timeout=60000 start=set parts=[] epoch=0",
    "edge.txnlist.aborted": "[edge-a:CompleteAbort]",
    "edge.scram.upsert": "ok",
    "edge.scram.upsert_bad": "UnacceptableCredentialException",
    "edge.scram.describe": "[ScramCredentialInfo{mechanism=SCRAM_SHA_256, iterations=8192}]",
    "edge.scram.users": "[edge-user]",
    "edge.scram.delete_missing": "ResourceNotFoundException",
    "edge.scram.delete": "ok",
    "edge.scram.after_delete": "[]",
    "edge.logdirs.all_brokers": "[1]",
    "edge.replicalogdirs.wrong_broker": "ok",
}


@pytest.fixture(scope="module")
def classpath(tmp_path_factory):
    if not java_available():
        pytest.skip(MISSING)
    return compile_check(os.path.join(HERE, "clients", "AdminCheck.java"), tmp_path_factory.mktemp("classes"))


def admin_check(classpath, bootstrap, mode) -> dict:
    run = subprocess.run(JAVA + ["-cp", classpath, "AdminCheck", bootstrap, mode],
                         capture_output=True, text=True, timeout=120)
    facts = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    assert facts.get("done") == "true", run.stdout + run.stderr[-3000:]
    return facts


def check_features(facts, supported):
    assert {k: facts[k] for k in FEATURE_FACTS} == FEATURE_FACTS
    assert facts["before.supported"] == facts["after.supported"] == supported


@pytest.mark.timeout(120)
def test_features_described_and_updated_as_kafka_and_kept_across_a_restart(classpath, tmp_path):
    with running_broker(tmp_path / "data") as broker:
        check_features(admin_check(classpath, broker.bootstrap, "features"), ODRADEK_SUPPORTED)
    with running_broker(tmp_path / "data") as broker:
        facts = admin_check(classpath, broker.bootstrap, "describe_features")
    assert facts["described.finalized"] == "metadata.version:20-20"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_kafka_answers_the_features_facts(classpath, apache_kafka):
    try:
        check_features(admin_check(classpath, apache_kafka.bootstrap, "features"), KAFKA_SUPPORTED)
    finally:   # the session's Kafka goes back to a fresh cluster's level for the tests after this
        admin_check(classpath, apache_kafka.bootstrap, "restore_features")


def check_sweep(facts):
    assert {k: facts.get(k) for k in SWEEP_FACTS} == SWEEP_FACTS


@pytest.mark.timeout(180)
def test_admin_calls_answer_as_kafka(classpath, tmp_path):
    with running_broker(tmp_path / "data") as broker:
        facts = admin_check(classpath, broker.bootstrap, "sweep")
    check_sweep(facts)
    # DescribeQuorum v2's Nodes are the voters' controller listeners; one `odradek serve` process
    # has none (its quorum is in-process), where Kafka's single node lists its CONTROLLER listener.
    assert facts["quorum.nodes"] == "[]"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_kafka_answers_the_sweep_facts(classpath, apache_kafka):
    try:
        facts = admin_check(classpath, apache_kafka.bootstrap, "sweep")
    finally:   # no sweep topic or group left for the session's later tests
        admin_check(classpath, apache_kafka.bootstrap, "sweep_cleanup")
    check_sweep(facts)
    assert facts["quorum.nodes"] == "[1]"
