"""One client connection: Kafka's length-prefixed frames in, responses out in request order.

A reader task takes frames off the socket and queues them; a runner task handles the queued requests
one after another; a writer task sends the responses strictly in the order the requests arrived, all
that are ready in one gather write (``writev``), record file slices with ``os.sendfile``; it sleeps
until the oldest unanswered request is done, so a request costs no task switch of its own. A burst
the runner handles without suspending (unbatched produce) it writes itself when the writer is idle,
one wake-up less per burst; should a request wait, what is done before it goes out at once. Request N+1
starts when request N has finished or has called ``RequestContext.release_order()`` — Produce does
that when it has to wait (fsync, replicas) once its batches are in the log, so pipelined produce
requests share one fsync while their appends stay in order. Releasing the order hands the queue to a
fresh runner task, so a request costs a task of its own only when it waits while later ones go
ahead (a task per request was most of the per-request cost of unbatched produce). At most
``MAX_IN_FLIGHT`` requests are pending per connection; past that the reader stops reading, so a client
that does not read its responses only slows itself down.

A large frame is read into a buffer of its own: a warm one from the broker's pool
(``broker.frame_buffers``) when one is free, else a new one that grows as its bytes arrive
(``FRAME_STEP`` at a time), so a declared size pins no memory by itself. ``RequestMemory`` bounds
the bytes of requests read but not yet processed across the broker (Kafka's
``queued.max.request.bytes``, unbounded by default).

A frame larger than ``socket.request.max.bytes``, a header that does not decode, an unknown API or a
version we do not serve (other than ApiVersions, KIP-511) close the connection, as Kafka does.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import struct
import time
import types
from typing import TYPE_CHECKING, Any

import trio

import protocol
from broker.connection_writes import CLOSE, ResponseWrites
from broker.frame_buffers import rounded
from broker.security.authenticator import RequestRefused, SaslAuthenticator
from broker.security.principal import ANONYMOUS

if TYPE_CHECKING:
    from broker.server import Broker

log = logging.getLogger("odradek.connection")

MAX_IN_FLIGHT = 64
# Bytes of produce requests waiting for their replicas at which a connection stops reading more
# (reading_held): a full request's worth (max.request.size and message.max.bytes are ~1 MiB).
HOLD_READING_AT_BYTES = 1 << 20
READ_AHEAD = 65536     # read-ahead chunk of a busy connection; larger frames get their own buffer
FIRST_READ = 4096      # chunk of a connection starting a burst (kept small: idle ones are many)
FRAME_STEP = 1 << 20   # a large frame's buffer grows by at most this much ahead of its bytes
_ZEROS = memoryview(bytes(FRAME_STEP))
_SIZE = struct.Struct(">i")
API_VERSIONS_KEY = 18
# A straight burst gives the loop back after this long: up to MAX_IN_FLIGHT pipelined requests
# (one record to each of thousands of partitions) must not hold every other connection for their sum.
BURST_SLICE_S = 0.002


class RequestMemory:
    """Kafka's ``queued.max.request.bytes``: bytes of requests read but not yet processed,
    across the broker. Past the bound, connections stop reading until requests finish; like
    Kafka's pool, a request may start while any room is left (so one frame larger than the
    bound still gets through). A bound of zero or less is no bound (Kafka's default, -1)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._freed = trio.Event()

    async def reserve(self, size: int):
        if self.limit <= 0:
            return
        while self.used >= self.limit:
            await self._freed.wait()
        self.used += size

    def release(self, size: int):
        if self.limit <= 0:
            return
        self.used -= size
        self._freed.set()
        self._freed = trio.Event()


class CloseConnection(Exception):
    """Raised by the request path to drop the connection (bad frame, unsupported request)."""


class _Slot:
    """One request's place in the response order."""

    __slots__ = ("done", "parts", "order_released", "close_after")

    def __init__(self):
        self.done = False             # response (or its absence) is known
        self.order_released = False   # the next request may start (its runner took the queue)
        self.parts: list[Any] | None = None
        self.close_after = False      # close the connection once this response is out


class RequestContext:
    """What a handler sees: the broker's components plus this request's connection."""

    __slots__ = ("broker", "connection", "header", "_slot", "size", "quota_task", "throttle_ms",
                 "throttle_manager", "request_quota_charged", "counted_error")

    def __init__(self, broker: "Broker", connection: "Connection", header, slot: _Slot,
                 size: int = 0):
        self.broker = broker
        self.connection = connection
        self.header = header
        self._slot = slot
        self.size = size                    # the request's bytes (the produce quota counts them)
        # client quotas (broker.quotas): the throttle a handler's quota decided, and by whom
        self.quota_task = None
        self.throttle_ms = 0
        self.throttle_manager = None
        self.request_quota_charged = False
        # A handler that counted its answer's errors in the metrics sets the first one (or 0)
        self.counted_error: int | None = None

    def release_order(self):
        """Let the connection's next request start although this one is still running."""
        self.connection._release_order(self._slot)

    def close_after_response(self):
        """Send this request's response, then close the connection (failed authentication)."""
        self._slot.close_after = True

    @property
    def principal(self):
        """Who sent the request (``broker.security.principal.KafkaPrincipal``)."""
        return self.connection.principal

    @property
    def client_host(self) -> str:
        """The client's IP address, as ACL host patterns match it."""
        return self.connection.client_host

    def __getattr__(self, name):
        # ctx.config, ctx.logs, ctx.controller, ... resolve to the broker's components.
        return getattr(self.broker, name)


class Connection(ResponseWrites):
    def __init__(self, broker: "Broker", stream: trio.SocketStream, listener_name: str,
                 security=None):
        self.broker = broker
        self.stream = stream
        self.listener_name = listener_name
        # authentication (broker.security): who this is, and the SASL exchange when the listener
        # has one; TLS connections are a subclass (broker.security.tls_connection)
        self.principal = ANONYMOUS
        self.authenticator = None
        if security is not None and security.uses_sasl:
            self.authenticator = SaslAuthenticator(security, self, broker)
        try:
            peer = stream.socket.getpeername()
            self.peer = f"{peer[0]}:{peer[1]}"
            self.client_host = peer[0]
        except OSError:
            self.peer = "?"
            self.client_host = ""
        self.max_frame = broker.config["socket.request.max.bytes"]
        if self.authenticator is not None:   # Kafka's bound on frames before authentication
            self.max_frame = min(self.max_frame, security.max_receive_size)
        self.idle_ms = broker.config["connections.max.idle.ms"]
        self.last_activity = time.monotonic()
        self._fileno = stream.socket.fileno()
        self._chunk: bytearray | None = None   # read-ahead; frames are views into it
        self._start = 0                         # first byte not yet handed out as a frame
        self._end = 0                           # end of the bytes received so far
        self._drained = False                   # the last read left nothing in the socket
        # Requests read whose response is not written yet, in order. The writer sleeps only
        # while the oldest is unanswered: it is woken when a response is done (or reading
        # ends), not when a request arrives (no task switch per request for nothing to write).
        self._slots: collections.deque[_Slot] = collections.deque()
        self._reading_done = False    # no further slot will come: the writer ends once drained
        self._writer_wakeup: trio.Event | None = None   # while the writer waits
        self._room: trio.Event | None = None            # while the reader waits (MAX_IN_FLIGHT)
        self._queue: collections.deque = collections.deque()   # requests read, not started yet
        self._runner_active = False   # a runner task is taking requests off _queue (or waits)
        self._runner_idle: trio.Event | None = None   # set to wake the runner waiting for work
        self._running_straight = False   # the runner's burst has not suspended (yet)
        self._unsent: list | None = None   # the rest of an inline write: the writer sends it first
        self._nursery: trio.Nursery | None = None
        self._read_scope = trio.CancelScope()
        self._pending = 0    # requests read whose response is not written yet
        self._broken = False  # the socket failed: responses are dropped, requests still finish
        self.closed = False
        self.on_close: list = []  # callables run once the connection is gone (share sessions end with it)
        self._muted_until = 0.0   # trio clock: a quota throttle (KIP-219) stops reading till then
        self._held_bytes = 0      # of requests that hold reading back (reading_held)
        self._reading_resumed: trio.Event | None = None   # while the reader waits for them

    def set_principal(self, principal) -> None:
        """Authentication decided who this connection is (TLS certificate or SASL)."""
        self.principal = principal
        if self.authenticator is not None:   # authenticated: frames up to the normal bound
            self.max_frame = self.broker.config["socket.request.max.bytes"]

    # ------------------------------------------------------------------------------ lifecycle
    async def serve(self):
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._write_loop, nursery.cancel_scope)
                if self.idle_ms >= 0:
                    nursery.start_soon(self._idle_watchdog, nursery.cancel_scope)
                try:
                    with self._read_scope:
                        await self._read_loop(nursery)
                finally:
                    # The writer sends what is still pending, then ends the connection.
                    self._reading_done = True
                    self._wake_writer()
        except* CloseConnection as group:
            log.info("closing connection %s: %s", self.peer, group.exceptions[0])
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
            log.debug("connection %s went away: %s", self.peer, group.exceptions[0])
        except* Exception:
            log.exception("connection %s failed; closing it", self.peer)
        finally:
            self.closed = True
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)
            for callback in self.on_close:
                try:
                    callback()
                except Exception:
                    log.exception("connection %s: a close callback failed", self.peer)

    def mute(self, throttle_ms: int):
        """Read no further request from this client for `throttle_ms` (a quota throttle). The
        throttled response itself still goes out at once; requests already read still run."""
        self._muted_until = max(self._muted_until, trio.current_time() + throttle_ms / 1000)

    async def _wait_unmuted(self):
        while self._muted_until > trio.current_time():
            await trio.sleep_until(self._muted_until)

    @contextlib.contextmanager
    def reading_held(self, size: int):
        """While the block runs, this request's `size` bytes count against HOLD_READING_AT_BYTES:
        past it the connection reads no further request. A produce waiting for its replicas holds
        the next ones back, much as Kafka mutes a connection until it has answered: the client's
        batches go on filling meanwhile instead of leaving half full one after another to wait on
        the same replica round trip. Small requests still pipeline."""
        self._held_bytes += size
        try:
            yield
        finally:
            self._held_bytes -= size
            if self._reading_resumed is not None:
                self._reading_resumed.set()
                self._reading_resumed = None

    async def _wait_reading_resumed(self):
        while self._held_bytes >= HOLD_READING_AT_BYTES:
            self._reading_resumed = self._reading_resumed or trio.Event()
            await self._reading_resumed.wait()

    def stop_reading(self):
        """Take no new requests; in-flight ones finish and their responses are sent (shutdown)."""
        self._read_scope.cancel()

    async def _idle_watchdog(self, scope: trio.CancelScope):
        idle = self.idle_ms / 1000
        while True:
            remaining = self.last_activity + idle - time.monotonic()
            if remaining <= 0:
                if self._pending == 0:
                    log.debug("closing idle connection %s", self.peer)
                    scope.cancel()
                    return
                remaining = idle
            await trio.sleep(remaining)

    # -------------------------------------------------------------------------------- reading
    def _buffered_frame(self) -> memoryview | None:
        """The next frame when the read-ahead chunk already holds all of it (pipelined requests
        arrive together), taken without the reading coroutines; else None (nothing consumed)."""
        start = self._start
        if self._end - start < 4:
            return None
        (size,) = _SIZE.unpack_from(self._chunk, start)
        if not 0 <= size <= self.max_frame or 4 + size > READ_AHEAD or self._end - start - 4 < size:
            return None   # a bad size (_read_size closes the connection), a big frame or a partial one
        self._start = start + 4 + size
        return memoryview(self._chunk)[start + 4:start + 4 + size]

    async def _read_size(self) -> int | None:
        """The next frame's declared size, or None at end of stream; the prefix is consumed."""
        while self._end - self._start < 4:
            if not await self._receive_more(4):
                return None
        (size,) = _SIZE.unpack_from(self._chunk, self._start)
        if size < 0 or size > self.max_frame:
            raise CloseConnection(f"frame of {size} bytes exceeds socket.request.max.bytes")
        self._start += 4
        return size

    async def _read_frame(self, size: int) -> memoryview | None:
        """The frame of `size` bytes whose prefix _read_size took, or None at end of stream.

        A small frame is a view of the read-ahead chunk it arrived in (no copy: Produce batches
        reach storage as slices of the received bytes); a large one (a big Produce) is read into a
        buffer of its own: a free one from the broker's pool when there is one, else a new one grown
        only as its bytes arrive. It goes back to the pool when its request is done (``_handle``).
        """
        if 4 + size <= READ_AHEAD:
            while self._end - self._start < size:
                if not await self._receive_more(size):
                    return None
            start = self._start
            self._start += size
            return memoryview(self._chunk)[start:start + size]
        buffer = self.broker.frame_buffers.take(size)
        have = self._end - self._start
        if buffer is None:
            buffer = bytearray(memoryview(self._chunk)[self._start:self._end])
            capacity = rounded(size)
        else:
            buffer[:have] = memoryview(self._chunk)[self._start:self._end]
            capacity = len(buffer)
        self._start = self._end
        while have < size:
            if have == len(buffer):   # room for one more step, never the whole declared size
                buffer += _ZEROS[:min(capacity - have, FRAME_STEP)]
            with memoryview(buffer) as whole, whole[have:size] as free:
                received = await self._recv_into(free)
            if not received:
                return None
            have += received
        self.last_activity = time.monotonic()
        with memoryview(buffer) as whole:
            return whole[:size]

    async def _receive_more(self, need: int) -> bool:
        """Receive into the read-ahead chunk, which must have room for `need` bytes from _start.

        Frames handed out are views of their chunk, so a chunk is never written below _end: a
        full one is replaced (carrying over the partial frame only), and a drained one is let go
        when the socket has nothing to read, so an idle connection holds no buffer.
        """
        while True:
            if self._drained:   # the last read emptied the socket: a read now would fail
                self._drained = False
                if self._start == self._end:
                    self._chunk, self._start, self._end = None, 0, 0
                await trio.lowlevel.wait_readable(self.stream.socket)
            chunk = self._chunk
            if chunk is None:   # a fresh or idle connection: most bursts are a small request
                chunk = self._replace_chunk(max(need, FIRST_READ))
            elif self._start + need > len(chunk):
                chunk = self._replace_chunk(max(need, READ_AHEAD))
            room = len(chunk) - self._end
            try:
                received = os.readv(self._fileno, [memoryview(chunk)[self._end:]])
            except BlockingIOError:
                self._drained = True
                continue
            if not received:
                return False
            # Fewer bytes than room: the socket is empty now, so the next read waits first
            # (one failing readv and its exception less per burst).
            self._drained = received < room
            self._end += received
            self.last_activity = time.monotonic()
            return True

    async def _recv_into(self, buffer) -> int:
        return await self.stream.socket.recv_into(buffer)

    def _replace_chunk(self, size: int) -> bytearray:
        chunk = bytearray(size)
        pending = self._end - self._start
        if pending:
            chunk[:pending] = memoryview(self._chunk)[self._start:self._end]
        self._chunk, self._start, self._end = chunk, 0, pending
        return chunk

    async def _read_loop(self, nursery: trio.Nursery):
        memory = self.broker.request_memory
        slots = self._slots
        while True:
            try:
                frame = self._buffered_frame() if memory.limit <= 0 else None
                if frame is not None:
                    size = len(frame)
                else:
                    size = await self._read_size()
                    if size is None:
                        return
                    if memory.limit > 0:
                        await memory.reserve(size)   # queued.max.request.bytes: wait for room
                try:
                    if frame is None:
                        frame = await self._read_frame(size)
                    if frame is None:
                        memory.release(size)
                        return
                    # (waits before the request takes a slot: one cancelled here leaves none behind)
                    if self._muted_until:
                        await self._wait_unmuted()
                    if self._held_bytes >= HOLD_READING_AT_BYTES:
                        await self._wait_reading_resumed()
                    while len(slots) >= MAX_IN_FLIGHT:   # wait for the writer to make room
                        self._room = trio.Event()
                        await self._room.wait()
                    slot = _Slot()
                    self._pending += 1
                    slots.append(slot)
                except BaseException:
                    memory.release(size)
                    raise
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                # The client went away: like a clean end of stream, requests already read still
                # run to completion (a produce that arrived is appended), only unanswered.
                log.debug("connection %s: read failed: %s", self.peer, exc)
                return
            self._queue.append((frame, size, slot, time.monotonic()))
            if not self._runner_active:
                self._runner_active = True
                nursery.start_soon(self._run_queue)
            elif self._runner_idle is not None:   # the runner waits for work: hand it this
                self._runner_idle.set()
                self._runner_idle = None

    # ----------------------------------------------------------------------------- processing
    async def _run_queue(self):
        """Handle queued requests in order, waiting for more when the queue is empty (waking a
        waiting task costs less than starting one per burst), until one releases the order: then
        a fresh runner has taken the queue and this one only finishes its request. The
        connection's end cancels a waiting runner with the rest of its tasks.

        A burst that runs through without suspending (unbatched produce) writes its own
        responses at the end when the writer is idle: no writer wake-up, one task switch less
        per burst. Should a request suspend, those done before it go out at once, as does every
        response finished while the runner is not running straight (``_write_now_or_wake``)."""
        while True:
            self._running_straight = True
            released = await _noting_suspension(self._run_burst(), self._burst_suspended)
            self._running_straight = False
            self._write_now_or_wake()
            if released:
                return
            if self._queue:   # the burst used up its slice: other tasks first, then the rest
                await trio.lowlevel.checkpoint()
                continue
            self._runner_idle = trio.Event()
            await self._runner_idle.wait()

    async def _run_burst(self) -> bool:
        """The queued requests in order, for about one slice (BURST_SLICE_S) of the loop; True when
        one released the order (its runner ends)."""
        queue = self._queue
        slice_started = None
        while queue:
            frame, size, slot, received = queue.popleft()
            await self._handle(frame, size, slot, received)
            if slot.order_released:
                return True
            if queue:   # (never timed when requests come one at a time: no cost per request then)
                now = time.monotonic()
                if slice_started is None:
                    slice_started = now
                elif now - slice_started > BURST_SLICE_S:
                    return False
        return False

    def _burst_suspended(self):
        """The runner's burst is about to wait: what is done goes out without it."""
        self._running_straight = False
        self._write_now_or_wake()

    def _release_order(self, slot: _Slot):
        """Request `slot` lets the next ones start while it keeps running: hand the queue over."""
        if slot.order_released:
            return
        slot.order_released = True
        if self._queue:
            self._nursery.start_soon(self._run_queue)
        else:
            self._runner_active = False   # the reader starts a runner for the next request

    async def _handle(self, frame, size: int, slot: _Slot, received: float):
        try:
            if self._muted_until:
                # Requests read before a quota throttle wait it out too: as in Kafka, where a
                # throttled channel processes nothing more until the throttle time has passed.
                await self._wait_unmuted()
            slot.parts = await self._process(frame, size, slot, received)
        except (CloseConnection, RequestRefused) as exc:
            log.info("closing connection %s: %s", self.peer, exc)
            slot.parts = CLOSE
        except Exception:
            log.exception("request from %s failed; closing the connection", self.peer)
            slot.parts = CLOSE
        finally:
            if 4 + size > READ_AHEAD:   # a large frame's own buffer: warm for the next one
                self.broker.frame_buffers.give_back(frame)
            memory = self.broker.request_memory
            if memory.limit > 0:   # (unbounded by default: no call per request then)
                memory.release(size)
            slot.done = True
            if not self._running_straight:   # (else the runner writes it at the burst's end)
                self._write_now_or_wake()

    def _wake_writer(self):
        if self._writer_wakeup is not None:
            self._writer_wakeup.set()
            self._writer_wakeup = None

    async def _process(self, frame, size: int, slot: _Slot, received: float):
        authenticator = self.authenticator
        if authenticator is not None and authenticator.expects_raw_token:
            return [authenticator.raw_token(frame)]   # legacy SASL: bare tokens both ways
        try:
            header, body_offset = protocol.decode_request_header(frame)
        except protocol.DecodeError as exc:
            raise CloseConnection(f"undecodable request header: {exc}") from None
        api_key, api_version = header.request_api_key, header.request_api_version
        if authenticator is not None:
            authenticator.check_request(api_key)   # raises RequestRefused
        registry = self.broker.handlers
        entry = registry.get(api_key)
        if entry is None:
            raise CloseConnection(f"unsupported api key {api_key}")
        min_version, max_version, handler = entry
        if not min_version <= api_version <= max_version:
            if api_key == API_VERSIONS_KEY:
                from broker.handlers.api_versions import unsupported_version_response
                return [protocol.encode_response(API_VERSIONS_KEY, 0, header.correlation_id,
                                                 unsupported_version_response(registry))]
            raise CloseConnection(f"unsupported version {api_version} of api {api_key}")
        try:
            body = protocol.decode_request_body(header, frame, body_offset)
        except protocol.DecodeError as exc:
            raise CloseConnection(f"undecodable request (api {api_key} v{api_version}): "
                                  f"{exc}") from None
        ctx = RequestContext(self.broker, self, header, slot, size)
        started = time.monotonic()
        metrics = self.broker.metrics
        quotas = self.broker.quotas
        # (the in-flight gauge and the request-quota timer inline: calls per request add up)
        metrics.in_flight += 1
        if quotas.task_timer.installed:   # only while request quotas exist
            quotas.begin_request(ctx)
        try:
            response = await handler(ctx, header, body)
        finally:
            metrics.in_flight -= 1
            task_seconds = 0.0 if ctx.quota_task is None else quotas.end_request(ctx)
        quotas.finish_request(ctx, header, response, task_seconds)
        self.broker.observe_request(header, time.monotonic() - started, response,
                                    started - received, ctx.counted_error)
        if response is None:   # acks=0 produce: the client expects no response at all
            return None
        return protocol.encode_response_parts(api_key, api_version, header.correlation_id,
                                              response)



@types.coroutine
def _noting_suspension(coro, on_suspend):
    """``await coro``, calling ``on_suspend()`` when it first suspends (not if it never does)."""
    try:
        trap = coro.send(None)
    except StopIteration as done:
        return done.value
    on_suspend()
    while True:   # from here on, what ``yield from`` would do with the started coroutine
        try:
            value = yield trap
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                trap = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                trap = coro.send(value)
            except StopIteration as done:
                return done.value
