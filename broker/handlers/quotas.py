"""Client quotas: DescribeClientQuotas (48) v0–v1 and AlterClientQuotas (49) v0–v1.

Describe reads the metadata image; Alter goes through the controller, which validates each entry as
Kafka does and commits ClientQuotaRecords (``broker.controller.client_quotas``).
"""

from __future__ import annotations

from protocol import messages

from broker.controller import client_quotas
from broker.controller.errors import ApiError


async def handle_describe_client_quotas(ctx, header, body):
    Response = messages.DescribeClientQuotasResponse
    components = [(c.entity_type, c.match_type, c.match) for c in body.components]
    try:
        found = client_quotas.describe(ctx.image.client_quotas, components, body.strict)
    except ApiError as exc:
        return Response(throttle_time_ms=0, error_code=int(exc.code), error_message=exc.message,
                        entries=None)
    entries = [Response.EntryData(
        entity=[Response.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        values=[Response.ValueData(key=k, value=v) for k, v in sorted(values.items())])
        for entity, values in found]
    # Kafka answers a successful describe with an empty (not null) message.
    return Response(throttle_time_ms=0, error_code=0, error_message="", entries=entries)


async def handle_alter_client_quotas(ctx, header, body):
    Response = messages.AlterClientQuotasResponse
    alterations = [client_quotas.QuotaAlteration(
        entity=[(e.entity_type, e.entity_name) for e in entry.entity],
        ops=[(op.key, op.value, op.remove) for op in entry.ops]) for entry in body.entries]
    try:
        await client_quotas.alter_client_quotas(ctx.controller, alterations, body.validate_only)
    except ApiError as exc:
        for alteration in alterations:
            alteration.error_code, alteration.error_message = int(exc.code), exc.message
    return Response(throttle_time_ms=0, entries=[Response.EntryData(
        error_code=a.error_code, error_message=a.error_message,
        entity=[Response.EntityData(entity_type=t, entity_name=n) for t, n in a.entity])
        for a in alterations])


HANDLERS = {
    48: (0, 1, handle_describe_client_quotas),
    49: (0, 1, handle_alter_client_quotas),
}
