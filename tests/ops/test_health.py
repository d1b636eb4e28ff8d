"""/healthz, /readyz and /metrics over HTTP, with the watchdog and readiness conditions."""

import json
import time

import trio
from ops_helpers import http_get, parse_metrics, sample

from broker.health import Health, route, serve_ops_http
from broker.metrics import BrokerMetrics


async def get(port, path, method="GET"):
    return await trio.to_thread.run_sync(lambda: http_get(port, path, method=method))


async def test_endpoints_follow_readiness_conditions():
    metrics = BrokerMetrics(3, process_metrics=False)
    health = Health(metrics=metrics)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lambda task_status: serve_ops_http(
            0, health=health, metrics=metrics, host="127.0.0.1", task_status=task_status))

        status, _, body = await get(port, "/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"

        status, _, body = await get(port, "/readyz")
        doc = json.loads(body)
        assert status == 503 and doc["checks"] == {"recovery": "pending", "controller": "pending",
                                                   "listeners": "pending"}
        health.set("recovery")
        health.set("listeners")
        leader = []
        health.add_check("controller", lambda: bool(leader))
        assert (await get(port, "/readyz"))[0] == 503
        leader.append(1)
        status, _, body = await get(port, "/readyz")
        assert status == 200 and json.loads(body)["status"] == "ready"

        health.begin_shutdown()
        status, _, body = await get(port, "/readyz")
        assert status == 503 and json.loads(body)["checks"]["shutdown"] == "shutting down"
        assert (await get(port, "/healthz"))[0] == 200  # alive while draining

        metrics.record_produce("t", 4, 400)
        status, headers, body = await get(port, "/metrics")
        assert status == 200 and headers["content-type"].startswith("text/plain")
        s = parse_metrics(body.decode())
        assert sample(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 4
        assert sample(s, "odradek_build_info", version=metrics.version, node_id="3") == 1

        status, headers, zipped = await trio.to_thread.run_sync(lambda: http_get(
            port, "/metrics", headers={"Accept-Encoding": "gzip, deflate"}))
        assert status == 200 and headers["content-encoding"] == "gzip"
        import gzip
        s = parse_metrics(gzip.decompress(zipped).decode())
        assert sample(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 4

        status, headers, body = await get(port, "/metrics", method="HEAD")
        assert status == 200 and body == b"" and int(headers["content-length"]) > 0
        assert (await get(port, "/nope"))[0] == 404
        assert (await get(port, "/metrics", method="POST"))[0] == 405
        nursery.cancel_scope.cancel()


async def test_blocked_event_loop_fails_liveness():
    health = Health(max_loop_lag_s=0.2)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lambda task_status: serve_ops_http(
            0, health=health, host="127.0.0.1", task_status=task_status))
        await trio.sleep(0.05)
        time.sleep(0.8)  # block the loop, as a synchronous fsync on the loop would
        status, _, body = await get(port, "/healthz")
        assert status == 503 and json.loads(body)["loop_lag_seconds"] > 0.2
        with trio.fail_after(5):
            while (await get(port, "/healthz"))[0] != 200:  # recovers once the loop is fine
                await trio.sleep(0.1)
        nursery.cancel_scope.cancel()


async def test_garbage_request_gets_400_and_server_survives():
    health = Health(conditions=())
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lambda task_status: serve_ops_http(
            0, health=health, host="127.0.0.1", task_status=task_status))

        def garbage():
            import socket
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"x" * 9000)
                return s.recv(100)

        assert b"400" in await trio.to_thread.run_sync(garbage)
        assert (await get(port, "/readyz"))[0] == 200  # no conditions: ready
        nursery.cancel_scope.cancel()


def test_broken_check_reports_not_ready():
    health = Health(conditions=())
    health.add_check("controller", lambda: 1 / 0)
    ready, checks = health.readiness()
    assert not ready and checks["controller"].startswith("error")
    assert b" 503 " in route("GET", "/readyz", None, health)
    assert b" 404 " in route("GET", "/metrics", None, health)  # no metrics attached
