"""The authorizer's decisions (Kafka's StandardAuthorizer rules), ACL filters and validation."""

import uuid

import pytest

from broker.controller.acls import plan_create, plan_delete
from broker.controller.image import MetadataImage
from broker.security.acls import (
    AclBinding, AclBindingFilter, AclOperation as Op, AclPermissionType as Perm, InvalidAcl,
    PatternType as PT, ResourceType as RT,
)
from broker.security.authorizer import StandardAuthorizer
from broker.security.principal import ANONYMOUS, KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "10.0.0.1"


def acl(rtype=RT.TOPIC, name="orders", pattern=PT.LITERAL, principal="User:alice", host="*",
        op=Op.READ, perm=Perm.ALLOW):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*acls, super_users=(), allow_everyone=False):
    auth = StandardAuthorizer(super_users, allow_everyone)
    auth.load({uuid.uuid4(): a for a in acls})
    return auth


def can(auth, op, name="orders", who=ALICE, host=HOST, rtype=RT.TOPIC):
    return auth.authorize(who, host, op, rtype, name)


def test_principal_parse_and_format():
    assert KafkaPrincipal.parse("User:alice") == ALICE
    assert str(ALICE) == "User:alice" and str(ANONYMOUS) == "User:ANONYMOUS"
    assert KafkaPrincipal.parse("User:CN=a,O=b:c").name == "CN=a,O=b:c"
    with pytest.raises(ValueError):
        KafkaPrincipal.parse("alice")


def test_literal_acl_allows_only_its_principal_operation_and_resource():
    auth = authorizer(acl())
    assert can(auth, Op.READ)
    assert not can(auth, Op.WRITE)
    assert not can(auth, Op.READ, who=BOB)
    assert not can(auth, Op.READ, name="orders2")
    assert not can(auth, Op.READ, rtype=RT.GROUP)


def test_no_acl_found_defaults_to_deny_unless_allow_everyone():
    assert not can(authorizer(), Op.READ)
    assert can(authorizer(allow_everyone=True), Op.READ)
    # Once a resource has any ACL (even for someone else), allow.everyone no longer applies to it.
    auth = authorizer(acl(principal="User:bob"), allow_everyone=True)
    assert not can(auth, Op.READ)
    assert can(auth, Op.READ, name="other")


def test_super_users_bypass_acls_including_deny():
    auth = authorizer(acl(op=Op.ALL, perm=Perm.DENY, principal="User:*"),
                      super_users=["User:alice"])
    assert can(auth, Op.DELETE)
    assert not can(auth, Op.READ, who=BOB)


def test_wildcard_resource_and_principal():
    auth = authorizer(acl(name="*", principal="User:*"))
    assert can(auth, Op.READ, name="anything", who=BOB)
    assert not can(auth, Op.WRITE, name="anything", who=BOB)
    # As in Kafka, User:* matches principals of any type.
    assert can(auth, Op.READ, who=KafkaPrincipal("Group", "x"))


def test_prefixed_acls_match_names_starting_with_the_prefix():
    auth = authorizer(acl(name="team-a.", pattern=PT.PREFIXED),
                      acl(name="team-a.secret", pattern=PT.PREFIXED, perm=Perm.DENY))
    assert can(auth, Op.READ, name="team-a.orders")
    assert can(auth, Op.READ, name="team-a.")
    assert not can(auth, Op.READ, name="team-a")
    assert not can(auth, Op.READ, name="team-a.secret-stuff")
    assert not can(auth, Op.READ, name="team-b.orders")


def test_deny_wins_over_allow():
    auth = authorizer(acl(op=Op.ALL), acl(op=Op.WRITE, perm=Perm.DENY, principal="User:*"))
    assert can(auth, Op.READ)
    assert not can(auth, Op.WRITE)


def test_host_matching():
    auth = authorizer(acl(host="10.0.0.1"))
    assert can(auth, Op.READ, host="10.0.0.1")
    assert not can(auth, Op.READ, host="10.0.0.2")
    deny_one_host = authorizer(acl(), acl(host="10.0.0.2", perm=Perm.DENY))
    assert can(deny_one_host, Op.READ, host="10.0.0.1")
    assert not can(deny_one_host, Op.READ, host="10.0.0.2")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL])
def test_operations_that_imply_describe(granted):
    auth = authorizer(acl(op=granted))
    assert can(auth, Op.DESCRIBE)


def test_implications_are_kafkas_only():
    assert not can(authorizer(acl(op=Op.CREATE)), Op.DESCRIBE)
    assert can(authorizer(acl(op=Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not can(authorizer(acl(op=Op.ALTER_CONFIGS)), Op.DESCRIBE)
    assert not can(authorizer(acl(op=Op.DESCRIBE)), Op.READ)
    # A DENY implies nothing: denying READ does not deny DESCRIBE.
    auth = authorizer(acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=Perm.DENY))
    assert can(auth, Op.DESCRIBE) and not can(auth, Op.READ)


def test_authorized_operations_bitfield():
    auth = authorizer(acl(op=Op.WRITE))
    bits = auth.authorized_operations(ALICE, HOST, RT.TOPIC, "orders")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE)


def test_authorize_by_resource_type():
    # KIP-679: WRITE on any topic is enough for an idempotent producer.
    assert authorizer(acl(op=Op.WRITE)).authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not authorizer(acl(op=Op.READ)).authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    # An allow dominated by a prefix deny does not count; a wildcard deny denies everything.
    dominated = authorizer(acl(op=Op.WRITE, name="team.x"),
                           acl(op=Op.WRITE, name="team.", pattern=PT.PREFIXED, perm=Perm.DENY))
    assert not dominated.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    wildcard_deny = authorizer(acl(op=Op.WRITE), acl(op=Op.WRITE, name="*", perm=Perm.DENY))
    assert not wildcard_deny.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert authorizer(super_users=["User:alice"]).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, RT.TOPIC)


def test_index_follows_additions_and_removals():
    first, second = uuid.uuid4(), uuid.uuid4()
    auth = StandardAuthorizer()
    auth.load({first: acl(name="a.", pattern=PT.PREFIXED)})
    assert can(auth, Op.READ, name="a.b")
    auth.load({second: acl(name="b")})
    assert not can(auth, Op.READ, name="a.b") and can(auth, Op.READ, name="b")
    assert auth.index.count == 1


def test_filters_match_like_kafka():
    prefixed = acl(name="foo", pattern=PT.PREFIXED)
    literal = acl(name="foobar")
    wildcard = acl(name="*")
    match = AclBindingFilter(RT.TOPIC, "foobar", PT.MATCH)
    assert match.matches(prefixed) and match.matches(literal) and match.matches(wildcard)
    assert not AclBindingFilter(RT.TOPIC, "foo", PT.LITERAL).matches(prefixed)
    assert AclBindingFilter(RT.ANY, "foo", PT.ANY).matches(prefixed)
    assert not AclBindingFilter(RT.ANY, "foobar", PT.PREFIXED).matches(prefixed)
    assert not AclBindingFilter(principal="User:bob").matches(literal)
    assert AclBindingFilter(operation=Op.READ, permission=Perm.ALLOW).matches(literal)


@pytest.mark.parametrize("bad", [
    acl(rtype=RT.ANY), acl(rtype=RT.UNKNOWN), acl(pattern=PT.MATCH), acl(pattern=PT.ANY),
    acl(op=Op.ANY), acl(perm=Perm.ANY), acl(name=""), acl(rtype=RT.CLUSTER, name="other"),
])
def test_invalid_bindings_are_refused(bad):
    with pytest.raises(InvalidAcl):
        bad.validate_new()


def test_controller_plans_store_once_and_delete_by_filter():
    image = MetadataImage()
    records, results = plan_create(image, [acl(), acl(), acl(rtype=RT.ANY), acl(rtype=RT.UNKNOWN)])
    assert [r.error_code for r in results] == [0, 0, 42, 42]    # Kafka 3.9's controller
    assert len(records) == 1                       # the duplicate is stored once
    image = image.apply(records, 0)
    records, results = plan_create(image, [acl()])
    assert records == [] and results[0].error_code == 0
    records, results = plan_delete(image, [AclBindingFilter(), AclBindingFilter(RT.TOPIC),
                                           AclBindingFilter(RT.UNKNOWN)])
    assert len(records) == 1
    assert [len(r.deleted) for r in results] == [1, 1, 0] and results[2].error_code == 42
    image = image.apply(records, 1)
    assert dict(image.acls) == {}
    # A snapshot of the image carries its ACLs.
    image = image.apply(plan_create(image, [acl(op=Op.WRITE)])[0], 2)
    rebuilt = MetadataImage().apply(image.to_records(), 2)
    assert list(rebuilt.acls.values()) == [acl(op=Op.WRITE)]


def test_lookups_touch_only_the_acls_that_can_apply():
    acls = {uuid.uuid4(): acl(name=f"topic-{i}") for i in range(10_000)}
    acls.update({uuid.uuid4(): acl(name=f"team-{i}.", pattern=PT.PREFIXED) for i in range(100)})
    acls[uuid.uuid4()] = acl(name="*", op=Op.DESCRIBE)
    auth = StandardAuthorizer()
    auth.load(acls)
    applying = auth.index.applying_to(RT.TOPIC, "team-7.orders")
    assert sorted(a.resource_name for a in applying) == ["*", "team-7."]
    assert len(auth.index.applying_to(RT.TOPIC, "topic-42")) == 2
    assert auth.index.applying_to(RT.GROUP, "topic-42") == []
    assert can(auth, Op.READ, name="team-7.orders") and not can(auth, Op.READ, name="team-x")


def test_acl_apis_version_0_speak_literal_patterns(tmp_path):
    from broker.testing import running_broker
    from protocol import messages
    from tests.security.acl_client import HostClient, create_acls, creation, describe_acls
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:ANONYMOUS"}
    with running_broker(tmp_path / "v0", overrides) as broker, \
            HostClient(broker.port, "127.0.0.1") as client:
        assert create_acls(client, creation(RT.TOPIC, "v0-topic", Op.READ), version=0) == [0]
        described = describe_acls(client, RT.TOPIC, "v0-topic", PT.LITERAL, version=0)
        assert [(r.resource_name, [a.operation for a in r.acls]) for r in described.resources] == \
            [("v0-topic", [Op.READ])]
        D = messages.DeleteAclsRequest
        response = client.request(31, 0, D(filters=[D.DeleteAclsFilter(
            resource_type_filter=RT.TOPIC, resource_name_filter="v0-topic", principal_filter=None,
            host_filter=None, operation=Op.ANY, permission_type=Perm.ANY)]))
        assert [a.resource_name for a in response.filter_results[0].matching_acls] == ["v0-topic"]


@pytest.mark.parametrize("api_key", [11, 12, 13, 14, 25, 26, 27, 35, 45, 46, 48, 49, 50, 55, 56, 57,
                                     62, 63, 64, 67, 74])
def test_whole_request_refusals_encode_at_every_version(api_key):
    """The error responses of the request rules, for APIs this broker may serve later too."""
    import protocol
    from protocol import ErrorCode, messages
    from broker.security.access import REQUEST_RULES, error_response

    assert api_key in REQUEST_RULES
    request = messages.REQUESTS[api_key]()
    if api_key == 49:
        A = messages.AlterClientQuotasRequest
        request = A(entries=[A.EntryData(entity=[A.EntityData(entity_type="user", entity_name="u")],
                                         ops=[])], validate_only=False)
    if api_key == 27:
        W = messages.WriteTxnMarkersRequest
        request = W(markers=[W.WritableTxnMarker(
            producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
            topics=[W.WritableTxnMarkerTopic(name="t", partition_indexes=[0])])])
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    response = error_response(api_key, code, request)
    low, high = messages.RESPONSES[api_key].VALID_VERSIONS
    for version in range(low, high + 1):
        encoded = b"".join(bytes(p) for p in protocol.encode_response_parts(api_key, version, 7,
                                                                             response))
        assert len(encoded) > 4
    if api_key in (27, 49):
        text = repr(response)
        assert "CLUSTER_AUTHORIZATION_FAILED" in text
    else:
        assert response.error_code == code
