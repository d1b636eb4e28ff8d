"""`python -m pipelines`: the order-totals pipeline on Spark against Odradek (or any Kafka).

    python -m pipelines run                      # an in-process Odradek, generated events, the streaming
                                                 # job, and a check against plain Python
    python -m pipelines run --bootstrap HOST:PORT
    python -m pipelines generate --bootstrap HOST:PORT --orders 5000
    python -m pipelines stream --bootstrap HOST:PORT --checkpoint /var/lib/pipeline/cp
    python -m pipelines reprocess --bootstrap HOST:PORT --from 2026-11-23T10:00 --to 2026-11-23T11:00

Spark's Kafka connector comes from `--jars DIR` (or $SPARK_KAFKA_JARS) when given, else from Maven
through `spark.jars.packages` (needs internet).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import sys
import tempfile
import time

from .events import WINDOW_MS, generate, latest_products, window_totals

DEFAULT_TOPICS = {"orders": "orders", "products": "products", "output": "product-totals"}


def _time_ms(text: str) -> int:
    if text.isdigit():
        return int(text)
    moment = datetime.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


@contextlib.contextmanager
def _bootstrap(args):
    """The given bootstrap, or an Odradek started in-process for the run."""
    if args.bootstrap:
        yield args.bootstrap
        return
    from broker.testing import running_broker
    with tempfile.TemporaryDirectory(prefix="odradek-pipeline-") as data_dir:
        with running_broker(data_dir) as broker:
            print(f"pipelines: started Odradek in-process at {broker.bootstrap}", file=sys.stderr)
            yield broker.bootstrap


def _client(bootstrap):
    from broker.admin.client import KafkaClient
    return KafkaClient(bootstrap)


def _feed(client, topics, *, orders: int, seed: int, start_ms: int):
    from .kafka_io import ensure_topics, send_orders, send_products
    ensure_topics(client, orders=topics["orders"], products=topics["products"], output=topics["output"])
    first, renamed, events = generate(orders, seed=seed, start_ms=start_ms)
    send_products(client, topics["products"], first + renamed)   # later versions win the join
    send_orders(client, topics["orders"], events)
    return latest_products(first, renamed), events


def _print_table(rows, limit=20):
    print(f"{'window start (UTC)':<20} {'product':<8} {'name':<16} {'category':<9} {'orders':>6} {'revenue':>10}")
    for row in sorted(rows, key=lambda r: (r.window_start_ms, r.product_id))[:limit]:
        start = datetime.datetime.fromtimestamp(row.window_start_ms / 1000, datetime.timezone.utc)
        print(f"{start:%Y-%m-%d %H:%M:%S} {row.product_id:<8} {row.name:<16} {row.category:<9} "
              f"{row.orders:>6} {row.revenue_cents / 100:>10.2f}")
    if len(rows) > limit:
        print(f"... {len(rows) - limit} more rows")


def cmd_run(args) -> int:
    from . import streaming
    from .kafka_io import read_table
    from .session import spark_session
    prefix = f"pipeline-{int(time.time())}-"
    topics = {kind: prefix + name for kind, name in DEFAULT_TOPICS.items()}
    with _bootstrap(args) as bootstrap, _client(bootstrap) as client:
        start_ms = int(time.time() * 1000) - 15 * WINDOW_MS
        products, events = _feed(client, topics, orders=args.orders, seed=args.seed, start_ms=start_ms)
        spark = spark_session(args.jars)
        checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="pipeline-checkpoint-")
        query = streaming.start(spark, bootstrap, orders_topic=topics["orders"],
                                products_topic=topics["products"], output_topic=topics["output"],
                                checkpoint=checkpoint, trigger_seconds=None)
        query.awaitTermination()
        table = read_table(client, topics["output"])
        spark.stop()
    expected = window_totals(events, products)
    _print_table(list(table.values()))
    same = table == expected
    print(f"{len(events)} orders → {len(table)} (window, product) rows in {topics['output']}; "
          f"equal to the plain-Python computation: {'yes' if same else 'NO'}")
    return 0 if same else 1


def cmd_generate(args) -> int:
    with _client(args.bootstrap) as client:
        start_ms = _time_ms(args.start) if args.start else int(time.time() * 1000) - 15 * WINDOW_MS
        _, events = _feed(client, DEFAULT_TOPICS | _topic_args(args), orders=args.orders, seed=args.seed,
                          start_ms=start_ms)
    print(f"sent {len(events)} orders from {events[0].event_time_ms} to {events[-1].event_time_ms} ms")
    return 0


def cmd_stream(args) -> int:
    from . import streaming
    from .session import spark_session
    topics = DEFAULT_TOPICS | _topic_args(args)
    spark = spark_session(args.jars)
    query = streaming.start(spark, args.bootstrap, orders_topic=topics["orders"],
                            products_topic=topics["products"], output_topic=topics["output"],
                            checkpoint=args.checkpoint, trigger_seconds=args.trigger_seconds)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    return 0


def cmd_reprocess(args) -> int:
    from .batch import reprocess
    from .events import WindowTotal
    from .kafka_io import partitions_of
    from .session import spark_session
    topics = DEFAULT_TOPICS | _topic_args(args)
    from_ms, to_ms = _time_ms(args.from_), _time_ms(args.to)
    from_ms -= from_ms % WINDOW_MS                      # whole windows only
    to_ms += -to_ms % WINDOW_MS
    with _client(args.bootstrap) as client:
        partitions = partitions_of(client, topics["orders"])
    spark = spark_session(args.jars)
    out = reprocess(spark, args.bootstrap, orders_topic=topics["orders"], products_topic=topics["products"],
                    partitions=partitions, from_ms=from_ms, to_ms=to_ms, output_topic=args.write_to)
    _print_table([WindowTotal.from_json(r["value"].encode()) for r in out.collect()], limit=args.limit)
    spark.stop()
    return 0


def _topic_args(args) -> dict[str, str]:
    return {kind: value for kind in DEFAULT_TOPICS if (value := getattr(args, f"{kind}_topic", None))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name, func, help_text, needs_bootstrap=True):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--bootstrap", required=needs_bootstrap,
                       default=os.environ.get("ODRADEK_BOOTSTRAP_SERVER") if needs_bootstrap else None,
                       help="host:port of any Kafka-compatible broker")
        p.add_argument("--jars", help="directory with Spark's Kafka connector jars (default $SPARK_KAFKA_JARS, "
                                      "else spark.jars.packages)")
        for kind, default in DEFAULT_TOPICS.items():
            p.add_argument(f"--{kind}-topic", help=f"default {default}")
        p.set_defaults(func=func)
        return p

    p = command("run", cmd_run, "generate events, run the streaming job to the end, check the result",
                needs_bootstrap=False)
    p.add_argument("--orders", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--checkpoint")
    p = command("generate", cmd_generate, "send product references and order events")
    p.add_argument("--orders", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", help="event time of the first order (ISO-8601 or ms; default 15 minutes ago)")
    p = command("stream", cmd_stream, "run the streaming job until interrupted")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--trigger-seconds", type=float, default=5.0)
    p = command("reprocess", cmd_reprocess, "recompute the totals of a time range (batch)")
    p.add_argument("--from", dest="from_", required=True, help="ISO-8601 (UTC unless given) or ms")
    p.add_argument("--to", required=True)
    p.add_argument("--write-to", help="also write the rows to this topic")
    p.add_argument("--limit", type=int, default=50)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
