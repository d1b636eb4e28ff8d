"""ACL and SCRAM changes between a broker and the active controller, in Kafka's own messages.

A broker that is not the active controller forwards CreateAcls (30), DeleteAcls (31) and
AlterUserScramCredentials (51) to it, as Kafka does; the controller answers with the same messages.
These functions turn the controller's arguments and results into those bodies and back, so both ends
share one mapping:

    broker:      *_request(args) ──► controller listener ──► ControllerApi: *_args(body)
    controller:  *_response(results) ──► broker: *_results(response)
"""

from __future__ import annotations

from protocol import messages as m

from broker.controller.acls import AclCreateResult, AclDeleteResult
from broker.controller.scram import ScramDeletion, ScramUpsertion
from broker.security.acls import AclBinding, AclBindingFilter

ACL_VERSION = 3
SCRAM_VERSION = 0


# -- CreateAcls ----------------------------------------------------------------------------------------

def create_acls_request(bindings) -> m.CreateAclsRequest:
    R = m.CreateAclsRequest
    return R(creations=[R.AclCreation(
        resource_type=b.resource_type, resource_name=b.resource_name,
        resource_pattern_type=b.pattern_type, principal=b.principal, host=b.host,
        operation=b.operation, permission_type=b.permission) for b in bindings])


def create_acls_args(body) -> list[AclBinding]:
    return [AclBinding.of(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                          c.host, c.operation, c.permission_type) for c in body.creations]


def create_acls_response(results) -> m.CreateAclsResponse:
    R = m.CreateAclsResponse
    return R(throttle_time_ms=0, results=[
        R.AclCreationResult(error_code=r.error_code, error_message=r.error_message)
        for r in results])


def create_acls_results(response) -> list[AclCreateResult]:
    return [AclCreateResult(r.error_code, r.error_message) for r in response.results]


# -- DeleteAcls ----------------------------------------------------------------------------------------

def delete_acls_request(filters) -> m.DeleteAclsRequest:
    R = m.DeleteAclsRequest
    return R(filters=[R.DeleteAclsFilter(
        resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
        pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
        operation=f.operation, permission_type=f.permission) for f in filters])


def delete_acls_args(body) -> list[AclBindingFilter]:
    return [AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter,
                                f.pattern_type_filter, f.principal_filter, f.host_filter,
                                f.operation, f.permission_type) for f in body.filters]


def delete_acls_response(results) -> m.DeleteAclsResponse:
    R = m.DeleteAclsResponse
    return R(throttle_time_ms=0, filter_results=[R.DeleteAclsFilterResult(
        error_code=r.error_code, error_message=r.error_message, matching_acls=[
            R.DeleteAclsMatchingAcl(
                error_code=0, error_message=None, resource_type=a.resource_type,
                resource_name=a.resource_name, pattern_type=a.pattern_type,
                principal=a.principal, host=a.host, operation=a.operation,
                permission_type=a.permission) for a in r.deleted])
        for r in results])


def delete_acls_results(response) -> list[AclDeleteResult]:
    return [AclDeleteResult(r.error_code, r.error_message, [
        AclBinding.of(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
                      a.operation, a.permission_type) for a in r.matching_acls])
        for r in response.filter_results]


# -- AlterUserScramCredentials -------------------------------------------------------------------------

def alter_scram_request(deletions, upsertions) -> m.AlterUserScramCredentialsRequest:
    R = m.AlterUserScramCredentialsRequest
    return R(deletions=[R.ScramCredentialDeletion(name=d.name, mechanism=d.mechanism)
                        for d in deletions],
             upsertions=[R.ScramCredentialUpsertion(
                 name=u.name, mechanism=u.mechanism, iterations=u.iterations, salt=u.salt,
                 salted_password=u.salted_password) for u in upsertions])


def alter_scram_args(body) -> tuple[list[ScramDeletion], list[ScramUpsertion]]:
    return ([ScramDeletion(d.name, d.mechanism) for d in body.deletions],
            [ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt),
                            bytes(u.salted_password)) for u in body.upsertions])


def alter_scram_response(outcome: dict) -> m.AlterUserScramCredentialsResponse:
    R = m.AlterUserScramCredentialsResponse
    return R(throttle_time_ms=0, results=[
        R.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)
        for user, (code, message) in outcome.items()])


def alter_scram_results(response) -> dict:
    return {r.user: (r.error_code, r.error_message) for r in response.results}
