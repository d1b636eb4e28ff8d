"""Raw-protocol helpers for the authorization tests: clients with a chosen source address (ACL
hosts tell them apart) and the ACL APIs."""

from __future__ import annotations

import itertools
import socket

from protocol import messages

from broker.security.acls import (
    AclOperation as Op, AclPermissionType as Perm, PatternType as PT, ResourceType as RT,
)
from tests.broker.raw_client import RawClient

ADMIN_HOST, USER_HOST = "127.0.0.1", "127.0.0.2"


class HostClient(RawClient):
    """A RawClient whose connection comes from `source` (a loopback address)."""

    def __init__(self, port: int, source: str, timeout: float = 20.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                             source_address=(source, 0))
        self._ids = itertools.count(1)


def creation(rtype, name, op, *, pattern=PT.LITERAL, principal="User:*", host=USER_HOST,
             perm=Perm.ALLOW):
    C = messages.CreateAclsRequest
    return C.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                         principal=principal, host=host, operation=op, permission_type=perm)


def create_acls(client, *creations, version=3):
    response = client.request(30, version, messages.CreateAclsRequest(creations=list(creations)))
    return [r.error_code for r in response.results]


def grant(client, rtype, name, *ops, **kwargs):
    codes = create_acls(client, *(creation(rtype, name, op, **kwargs) for op in ops))
    assert codes == [0] * len(ops)


def delete_filter(rtype=RT.ANY, name=None, pattern=PT.ANY, principal=None, host=None,
                  op=Op.ANY, perm=Perm.ANY):
    D = messages.DeleteAclsRequest
    return D.DeleteAclsFilter(resource_type_filter=rtype, resource_name_filter=name,
                              pattern_type_filter=pattern, principal_filter=principal,
                              host_filter=host, operation=op, permission_type=perm)


def delete_acls(client, *filters, version=3):
    return client.request(31, version, messages.DeleteAclsRequest(filters=list(filters)))


def describe_acls(client, rtype=RT.ANY, name=None, pattern=PT.ANY, principal=None, host=None,
                  op=Op.ANY, perm=Perm.ANY, version=3):
    return client.request(29, version, messages.DescribeAclsRequest(
        resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=host, operation=op, permission_type=perm))
