"""Odradek's broker: the trio server, configuration, CLI and request handlers.

Running::

    odradek serve [--config server.properties] [--override key=value ...]
    # prints "odradek: listening on PLAINTEXT://HOST:PORT (advertised as PLAINTEXT://HOST:PORT)"

    from broker.testing import running_broker, serving_broker   # in-process broker for tests

Modules: ``config`` (Kafka's broker and topic config catalogs, validation, DescribeConfigs model),
``cli``, ``server`` (``Broker``: components, listeners, registration, shutdown), ``connection``
(frames, ordered responses, sendfile), ``partitions`` (``PartitionManager``: logs, leadership, high
watermarks, long-poll wake-ups), ``fetch_session`` (KIP-227), ``handlers/`` (one module per API
family), ``controller/`` (metadata quorum), ``coordinator/`` (groups, transactions), ``testing``.

Handlers
--------
Each module in ``broker/handlers/`` listed in ``broker.handlers.MODULES`` exposes
``HANDLERS = {api_key: (min_version, max_version, async_handler)}``. ApiVersions advertises exactly
the merged ranges. ``async def handler(ctx, header, body)`` returns a ``protocol.messages`` response
body, or None for no response (acks=0 Produce). A handler that raises closes the connection.

Requests on one connection run one after another (Kafka's order); a handler may call
``ctx.release_order()`` once the order-sensitive part is done (Produce does after its appends) so the
next request starts while it waits. Responses always go out in request order.

``ctx`` (``broker.connection.RequestContext``) — everything a handler, e.g. a coordinator, needs:

- ``ctx.header`` (api_key, api_version, correlation_id, client_id), ``ctx.connection``
  (``.listener_name``, ``.peer``), ``ctx.release_order()``; ``ctx.principal`` (the connection's
  ``broker.security.principal.KafkaPrincipal``, ANONYMOUS until authentication calls
  ``connection.set_principal``) and ``ctx.client_host`` (the client's IP), which ACLs match;
  authorization checks go through ``broker.security.access`` (``ctx.broker.authorizer`` is None
  when ``authorizer.class.name`` is empty: everything allowed);
- any ``Broker`` attribute, forwarded: ``ctx.config`` (``BrokerConfig``: ``ctx.config["key"]``),
  ``ctx.node_id``, ``ctx.broker_epoch``, ``ctx.image`` (current immutable metadata image),
  ``ctx.controller`` (async controller API: create_topics, allocate_producer_ids, ...),
  ``ctx.logs`` (storage ``LogManager``), ``ctx.partitions`` (``PartitionManager``),
  ``ctx.fetch_sessions``, ``ctx.coordinators`` (a dict where coordinators keep their state, e.g.
  ``ctx.coordinators["group"]``), ``ctx.run_blocking(fn, *args)`` (worker thread),
  ``ctx.broker.draining`` (shutting down), ``ctx.broker.startup_hooks`` (``async hook(broker,
  nursery)`` run once listening, before ``serve`` reports started).

Appending to a partition (internal topics included)::

    partition = ctx.partitions.leader(topic, index)          # raises PartitionError(code)
    result = await ctx.partitions.append(partition, batch_bytes, origin=AppendOrigin.COORDINATOR)
    await ctx.partitions.acknowledge(partition, result)      # fsync if configured, advance HW
    # append_many / acknowledge_many do several partitions at once: on the event loop when the
    # records are small (<= 64 KiB), else in one worker-thread trip

Once something is appended, acknowledge it even if the request is being cancelled (the client
went away): run both under ``trio.CancelScope(shield=True)`` as Produce does, or the high watermark
stays behind the log end until the next append.

On disk: partition logs in ``log.dirs`` (storage's layout); the metadata log and
``meta.properties`` in ``<first log dir>/metadata/`` (``metadata.log.dir`` to move it), one level
down because storage treats every ``<name>-<n>`` directory of a log dir as a partition.

Internal topics are created through ``ctx.controller.create_topics`` (as any topic); Produce refuses
client writes to ``__consumer_offsets`` / ``__transaction_state`` and Metadata never auto-creates them.
"""
