"""Kafka's per-entity quota metrics, read at scrape time from the quota sensors.

Kafka's JMX beans ``kafka.server:type={Produce,Fetch,Request,ControllerMutation},user=..,client-id=..``
become ``kafka_server_produce_byte_rate{user,client_id}``, ``..._throttle_time`` and so on. These are
the one place labels carry client ids (as Kafka's do); the series exist only while a quota of that
type is configured, idle sensors expire after an hour as in Kafka, and each family is capped at
``max_series`` entities (the most recently active).
"""

from __future__ import annotations

from prometheus_client.metrics_core import Metric

# manager name -> (value metric suffix, what it measures)
_VALUE_METRICS = {
    "produce": ("byte_rate", "Produce request bytes per second, per quota entity."),
    "fetch": ("byte_rate", "Fetch response bytes per second, per quota entity."),
    "request": ("request_time", "Request handler time in percent of one thread, per quota entity."),
    "controllermutation": ("mutation_rate", "Partitions mutated per second, per quota entity."),
}


class QuotaCollector:
    def __init__(self, quotas, max_series: int = 1000):
        self.quotas = quotas
        self.max_series = max_series

    def collect(self):
        for name, manager in self.quotas.managers.items():
            if not manager.sensors:
                continue
            now_ms = manager.clock()
            sensors = sorted(manager.sensors.items(), key=lambda item: -item[1].last_used_ms)
            sensors = sensors[:self.max_series]
            suffix, doc = _VALUE_METRICS[name]
            value = Metric(f"kafka_server_{name}_{suffix}", doc, "gauge")
            throttle = Metric(f"kafka_server_{name}_throttle_time",
                              "Average throttle time (ms) of throttled requests in the last "
                              "minute, per quota entity.", "gauge")
            throttled = Metric(f"kafka_server_{name}_throttled_requests",
                               "Requests throttled, per quota entity.", "counter")
            for (user, client_id), sensor in sensors:
                labels = {"user": user, "client_id": client_id}
                value.add_sample(value.name, labels, sensor.rate.measure(now_ms))
                throttle.add_sample(throttle.name, labels, sensor.throttle_avg_ms(now_ms))
                throttled.add_sample(throttled.name + "_total", labels, sensor.throttled)
            yield from (value, throttle, throttled)

    def describe(self):
        return []
