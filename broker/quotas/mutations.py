"""The controller mutation quota of one CreateTopics / CreatePartitions / DeleteTopics (KIP-599).

Each topic charges its partitions (created, added or deleted) to the client's token bucket, in
request order. *Strict* (request versions that know THROTTLING_QUOTA_EXCEEDED): a topic is refused
with that error while the bucket is in debt, otherwise it is taken even if that puts the bucket in
debt; the response's throttle is only set once a topic was refused. *Permissive* (older versions):
every topic is taken, and the response is throttled by however far the bucket went into debt.
"""

from __future__ import annotations

from broker.quotas import identity

THROTTLED_MESSAGE = "The throttling quota has been exceeded."
# The first request version of each API that can carry THROTTLING_QUOTA_EXCEEDED.
STRICT_SINCE = {19: 6, 37: 3, 20: 5}


class MutationQuota:
    def __init__(self, ctx, header):
        self.ctx = ctx
        # On a controller running a forwarded request there is no broker: the broker that took the
        # request charged its quota already.
        self.manager = ctx.broker.quotas.controller_mutation if ctx.broker is not None else None
        self.enabled = self.manager is not None and self.manager.enabled
        self.strict = header.api_version >= STRICT_SINCE[header.api_key]
        self.user, self.client_id = identity(ctx) if self.enabled else ("", "")
        self._throttle_ms = 0
        self._recorded_ms = 0

    def admit(self, partitions: int) -> bool:
        """Charge `partitions`; False (refuse the topic) when a strict quota is already spent."""
        if not self.enabled:
            return True
        manager, now_ms = self.manager, self.manager.clock()
        if self.strict:
            throttle = manager.mutation_throttle_ms(self.user, self.client_id, now_ms)
            if throttle > 0:
                self._throttle_ms, self._recorded_ms = throttle, now_ms
                return False
            manager.record_mutation(self.user, self.client_id, partitions, now_ms)
            return True
        manager.record_mutation(self.user, self.client_id, partitions, now_ms)
        throttle = manager.mutation_throttle_ms(self.user, self.client_id, now_ms)
        if throttle > 0:
            self._throttle_ms, self._recorded_ms = throttle, now_ms
        return True

    def finish(self) -> None:
        """Hand the throttle (what is left of it) to the request path, which mutes the client."""
        if self._throttle_ms:
            left = max(0, self._throttle_ms - (self.manager.clock() - self._recorded_ms))
            self.ctx.broker.quotas.throttle(self.ctx, self.manager, left)
