"""DescribeUserScramCredentials (50) v0 and AlterUserScramCredentials (51) v0 (KIP-554).

Credentials live in the metadata log; changes go through the controller (``controller.scram``).
"""

from __future__ import annotations

from protocol import ErrorCode, messages

from broker.controller.scram import ScramDeletion, ScramUpsertion
from broker.security import access
from broker.security.acls import AclOperation
from broker.security.sasl.scram import MECHANISMS


async def handle_describe(ctx, header, body):
    Response = messages.DescribeUserScramCredentialsResponse
    Result = Response.DescribeUserScramCredentialsResult
    Info = Response.CredentialInfo
    credentials = ctx.image.scram_credentials
    by_user: dict[str, list] = {}
    for (user, mechanism), credential in sorted(credentials.items()):
        by_user.setdefault(user, []).append(
            Info(mechanism=MECHANISMS[mechanism][1], iterations=credential.iterations))
    results = []
    if not body.users:
        results = [Result(user=user, error_code=0, error_message=None, credential_infos=infos)
                   for user, infos in by_user.items()]
    else:
        names = [u.name for u in body.users]
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
                results.append(Result(
                    user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                    error_message="Cannot describe SCRAM credentials for the same user twice "
                                  f"in a single request: {name}", credential_infos=[]))
            elif name not in by_user:
                results.append(Result(
                    user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=f"Attempt to describe a user credential that does not exist: "
                                  f"{name}", credential_infos=[]))
            else:
                results.append(Result(user=name, error_code=0, error_message=None,
                                      credential_infos=by_user[name]))
    return Response(throttle_time_ms=0, error_code=0, error_message="", results=results)


async def handle_alter(ctx, header, body):
    Response = messages.AlterUserScramCredentialsResponse
    if not access.cluster_allowed(ctx, AclOperation.ALTER):   # every user refused, as Kafka
        users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        return Response(throttle_time_ms=0, results=[
            Response.AlterUserScramCredentialsResult(
                user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
            for user in users])
    deletions = [ScramDeletion(d.name, d.mechanism) for d in body.deletions]
    upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
                  for u in body.upsertions]
    outcome = await ctx.controller.alter_user_scram_credentials(deletions, upsertions)
    return Response(throttle_time_ms=0, results=[
        Response.AlterUserScramCredentialsResult(user=user, error_code=code,
                                                 error_message=message)
        for user, (code, message) in outcome.items()])


HANDLERS = {
    50: (0, 0, handle_describe),
    51: (0, 0, handle_alter),
}
