"""Client quotas as Kafka enforces them (KIP-13, KIP-124, KIP-219, KIP-599).

``BrokerQuotas`` holds one ``ClientQuotaManager`` per quota type, kept in step with the metadata
image's client quotas (``ClientQuotaRecord``s, see ``broker.controller.client_quotas``):

- ``producer_byte_rate``: Produce request bytes; ``consumer_byte_rate``: Fetch response bytes
  (a throttled Fetch returns no data and the bytes are taken back, as Kafka does);
- ``request_percentage``: event-loop time of a request's task, in percent of one thread over the
  quota window (``task_time.TaskTimer``), throttles capped at one window;
- ``controller_mutation_rate``: partitions created/deleted per second, a token bucket; strict
  (THROTTLING_QUOTA_EXCEEDED) for CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+,
  permissive (only throttled afterwards) for older versions.

``connections`` applies the connection creation rate limits (KIP-612) when connections are accepted.

Throttling (KIP-219): the response goes out at once carrying ``throttle_time_ms``; then the
connection reads nothing more from that client for that long (``Connection.mute``). Nothing is
dropped. The request's user is its principal's name (``ANONYMOUS`` without authentication).
"""

from __future__ import annotations

from broker.controller.client_quotas import (
    CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
)
from broker.quotas.connections import ConnectionRateQuotas
from broker.quotas.manager import ClientQuotaManager, monotonic_ms
from broker.quotas.task_time import TaskTimer

ANONYMOUS = "ANONYMOUS"
PRODUCE_KEY, FETCH_KEY = 0, 1
# Kafka's cluster-action APIs never count against (or get throttled by) the request quota.
EXEMPT_API_KEYS = frozenset({4, 5, 6, 7, 27, 52, 53, 54, 56, 58, 59, 62, 63, 67, 70, 73})
NANOS_TO_PERCENT = 100.0   # seconds of thread time -> percent of one thread


def principal_name(connection) -> str:
    """The user a request is charged to: its connection's authenticated principal's name.

    Works with a principal object (``.name``, as ``broker.security.principal.KafkaPrincipal``) or
    a plain string; until authentication lands every connection is ``User:ANONYMOUS``."""
    principal = getattr(connection, "principal", None)
    if principal is None:
        return ANONYMOUS
    return getattr(principal, "name", None) or str(principal)


class BrokerQuotas:
    def __init__(self, config, clock=monotonic_ms):
        samples, window_ms = config["quota.window.num"], config["quota.window.size.seconds"] * 1000
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples=samples,
                                          window_ms=window_ms, clock=clock)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples=samples, window_ms=window_ms,
                                        clock=clock)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples=samples, window_ms=window_ms,
                                          max_throttle_ms=window_ms, clock=clock)
        self.controller_mutation = ClientQuotaManager(
            CONTROLLER_MUTATION_RATE, samples=config["controller.quota.window.num"],
            window_ms=config["controller.quota.window.size.seconds"] * 1000, token_bucket=True,
            clock=clock)
        self.managers = {"produce": self.produce, "fetch": self.fetch, "request": self.request,
                         "controllermutation": self.controller_mutation}
        self.connections = ConnectionRateQuotas(config, clock)
        self.task_timer = TaskTimer()
        self._quotas = None

    # -- following the metadata image ----------------------------------------------------------
    def load(self, client_quotas) -> None:
        if client_quotas == self._quotas:
            return
        self._quotas = client_quotas
        for manager in self.managers.values():
            manager.update(client_quotas)
        self.connections.update(client_quotas)
        if self.request.enabled:
            self.task_timer.install()
        else:
            self.task_timer.uninstall()

    def on_image_change(self, change) -> None:
        self.load(change.new.client_quotas)

    # -- the request path ----------------------------------------------------------------------
    def begin_request(self, ctx) -> None:
        """Start charging the request's task time (only while request quotas exist)."""
        ctx.quota_task = self.task_timer.start()

    def end_request(self, ctx) -> float:
        """Stop charging the request's task (also when its handler failed); its seconds."""
        if ctx.quota_task is None:
            return 0.0
        return self.task_timer.stop(ctx.quota_task)

    def finish_request(self, ctx, header, response, task_seconds: float = 0.0) -> int:
        """After the handler: the request quota (unless the handler already charged it), then
        the response's throttle_time_ms and the connection's mute. Returns the throttle in ms."""
        throttle, manager = ctx.throttle_ms, ctx.throttle_manager
        if throttle <= 0 and not self.request.enabled:   # the common case, once per request
            return 0
        exempt = header.api_key in EXEMPT_API_KEYS or (header.api_key == PRODUCE_KEY
                                                       and response is None)
        if self.request.enabled and not exempt and not ctx.request_quota_charged:
            user, client_id = identity(ctx)
            request_throttle = self.request.record(user, client_id,
                                                   task_seconds * NANOS_TO_PERCENT)
            if request_throttle > throttle:
                throttle, manager = request_throttle, self.request
        if throttle <= 0:
            return 0
        user, client_id = identity(ctx)
        (manager or self.request).note_throttle(user, client_id, throttle)
        if response is not None and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = max(response.throttle_time_ms or 0, throttle)
        ctx.connection.mute(throttle)
        return throttle

    def charge_request_now(self, ctx) -> int:
        """The request quota charged before the response is built (a Fetch, which must know
        whether it is throttled to decide what to return)."""
        if not self.request.enabled or ctx.request_quota_charged:
            return 0
        ctx.request_quota_charged = True
        seconds = self.task_timer.elapsed(ctx.quota_task) if ctx.quota_task is not None else 0.0
        user, client_id = identity(ctx)
        return self.request.record(user, client_id, seconds * NANOS_TO_PERCENT)

    def throttle(self, ctx, manager: ClientQuotaManager, throttle_ms: int) -> None:
        """A handler's own quota decided on a throttle (the larger one wins)."""
        if throttle_ms > ctx.throttle_ms:
            ctx.throttle_ms, ctx.throttle_manager = throttle_ms, manager


def identity(ctx) -> tuple[str, str]:
    """(user, client id) a request is charged to."""
    return principal_name(ctx.connection), ctx.header.client_id or ""
