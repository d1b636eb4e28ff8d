"""Edge cases of CreateAcls / DescribeAcls / DeleteAcls, sent to Odradek and to the reference Apache
Kafka 3.9 with the StandardAuthorizer on: both answer the same codes and messages, or both close the
connection.

The expected answers below are what Kafka 3.9 answered when these tests were written; the `kafka`
parameter (-m slow: it starts its own JVM with the authorizer on) runs the same cases against it so
that they stay honest. It skips, with the reason, where Java or the Kafka directory is missing.
"""

from __future__ import annotations

import socket
import uuid

import pytest

from protocol import ErrorCode as E, messages

from broker.security.acls import (
    AclOperation as Op, AclPermissionType as Perm, PatternType as PT, ResourceType as RT,
)
from broker.security.authorizer import STANDARD_AUTHORIZER
from broker.testing import running_broker
from tests import apache_kafka as oracle
from tests.broker.raw_client import RawClient

CLOSED = "connection closed"
AUTHORIZER = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}


def _creation(rtype=RT.TOPIC, name="t", pattern=PT.LITERAL, principal="User:alice", host="*",
              op=Op.READ, perm=Perm.ALLOW):
    C = messages.CreateAclsRequest
    return C.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                         principal=principal, host=host, operation=op, permission_type=perm)


def _filter(rtype=RT.ANY, name=None, pattern=PT.ANY, principal=None, host=None, op=Op.ANY,
            perm=Perm.ANY):
    return dict(resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern,
                principal_filter=principal, host_filter=host, operation=op, permission_type=perm)


UNBUILDABLE = (E.UNKNOWN_SERVER_ERROR, None)   # Kafka cannot build the binding: no message
# name: (the creations of one CreateAcls request, Kafka's (code, message) for each)
CREATE_CASES = {
    "valid": ([_creation()], [(E.NONE, "")]),
    "prefixed": ([_creation(pattern=PT.PREFIXED, name="team-")], [(E.NONE, "")]),
    "wildcard-principal-and-name": ([_creation(principal="User:*", name="*")], [(E.NONE, "")]),
    "other-principal-type": ([_creation(principal="Group:ops")], [(E.NONE, "")]),
    "principal-without-colon": ([_creation(principal="nocolon")], [(E.NONE, "")]),
    "empty-principal": ([_creation(principal="")], [(E.NONE, "")]),
    "host-not-an-address": ([_creation(host="not an ip")], [(E.NONE, "")]),
    "resource-any": ([_creation(rtype=RT.ANY)], [UNBUILDABLE]),
    "pattern-match": ([_creation(pattern=PT.MATCH)], [UNBUILDABLE]),
    "pattern-any": ([_creation(pattern=PT.ANY)], [UNBUILDABLE]),
    "operation-any": ([_creation(op=Op.ANY)], [UNBUILDABLE]),
    "permission-any": ([_creation(perm=Perm.ANY)], [UNBUILDABLE]),
    "one-unbuildable-fails-all": ([_creation(), _creation(rtype=RT.ANY), _creation(rtype=99)],
                                  [UNBUILDABLE] * 3),
    "empty-name": ([_creation(name="")], [(E.INVALID_REQUEST, "Invalid empty resource name")]),
    "cluster-other-name-and-a-valid-one": (
        [_creation(rtype=RT.CLUSTER, name="other"), _creation()],
        [(E.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
         (E.NONE, "")]),
    "resource-code-99": ([_creation(rtype=99)],
                         [(E.INVALID_REQUEST, "Invalid resourceType UNKNOWN")]),
    "operation-code-99": ([_creation(op=99)], [(E.INVALID_REQUEST, "Invalid operation UNKNOWN")]),
    "resource-unknown": ([_creation(rtype=RT.UNKNOWN)], CLOSED),
    "operation-unknown": ([_creation(op=Op.UNKNOWN)], CLOSED),
}

# name: (one DescribeAcls filter, Kafka's code)
DESCRIBE_CASES = {
    "everything": (_filter(), E.NONE),
    "match-a-name": (_filter(RT.TOPIC, "t", PT.MATCH), E.NONE),
    "resource-code-99": (_filter(rtype=99), E.NONE),
    "principal-without-colon": (_filter(principal="alice"), E.NONE),
    "pattern-unknown": (_filter(pattern=PT.UNKNOWN), CLOSED),
    "permission-unknown": (_filter(perm=Perm.UNKNOWN), CLOSED),
}

# name: (one DeleteAcls filter, Kafka's code)
DELETE_CASES = {
    "nothing-matches": (_filter(RT.GROUP, f"nothing-{uuid.uuid4().hex[:6]}", PT.LITERAL), E.NONE),
    "operation-code-99": (_filter(op=99), E.INVALID_REQUEST),   # "Unknown entryFilter."
    "operation-unknown": (_filter(op=Op.UNKNOWN), CLOSED),
}


@pytest.fixture(scope="module")
def odradek_with_authorizer(tmp_path_factory):
    config = {"listeners": "PLAINTEXT://127.0.0.1:0", **AUTHORIZER}
    with running_broker(tmp_path_factory.mktemp("acl-requests"), config) as running:
        yield running


@pytest.fixture(scope="module")
def kafka_with_authorizer(tmp_path_factory):
    reason = oracle.skip_reason()
    if reason:
        pytest.skip(reason)
    kafka = oracle.ApacheKafka(tmp_path_factory.mktemp("kafka-acls"))
    (kafka.data_dir / "data").mkdir()
    (kafka.data_dir / "data" / "extra.properties").write_text(
        "".join(f"{k}={v}\n" for k, v in AUTHORIZER.items()))
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module", params=["odradek", pytest.param("kafka", marks=pytest.mark.slow)])
def target(request):
    if request.param == "kafka":
        return request.getfixturevalue("kafka_with_authorizer").port
    return request.getfixturevalue("odradek_with_authorizer").port


def _ask(port: int, api_key: int, body):
    with RawClient("127.0.0.1", port, timeout=30) as client:
        try:
            return client.request(api_key, 3, body)
        except (ConnectionError, socket.timeout, OSError, EOFError, AssertionError):
            return CLOSED


@pytest.mark.parametrize("case", sorted(CREATE_CASES))
def test_create_acls_answers_as_kafka(target, case):
    creations, expected = CREATE_CASES[case]
    response = _ask(target, 30, messages.CreateAclsRequest(creations=creations))
    if expected == CLOSED:
        assert response == CLOSED
        return
    assert response != CLOSED, "the connection was closed"
    assert [(r.error_code, r.error_message) for r in response.results] == expected


@pytest.mark.parametrize("case", sorted(DESCRIBE_CASES))
def test_describe_acls_answers_as_kafka(target, case):
    acl_filter, expected = DESCRIBE_CASES[case]
    response = _ask(target, 29, messages.DescribeAclsRequest(**acl_filter))
    if expected == CLOSED:
        assert response == CLOSED
        return
    assert response != CLOSED, "the connection was closed"
    assert response.error_code == expected, response.error_message


@pytest.mark.parametrize("case", sorted(DELETE_CASES))
def test_delete_acls_answers_as_kafka(target, case):
    acl_filter, expected = DELETE_CASES[case]
    D = messages.DeleteAclsRequest
    response = _ask(target, 31, D(filters=[D.DeleteAclsFilter(**acl_filter)]))
    if expected == CLOSED:
        assert response == CLOSED
        return
    assert response != CLOSED, "the connection was closed"
    assert response.filter_results[0].error_code == expected, response.filter_results[0]
