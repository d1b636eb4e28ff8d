"""The client adapters of the matrix, by name. `unavailable(name)` says why a client cannot run here."""

from __future__ import annotations

from .base import COMPRESSIONS, Client, ClientError, Delivery, PollResult, Unsupported

CLIENTS = ("java-4", "java-3.9", "confluent-kafka", "kcat", "kafka-python", "aiokafka", "kafkajs")


def unavailable(name: str) -> str | None:
    if name.startswith("java"):
        from .java import jars_missing
        return jars_missing(name)
    if name == "kcat":
        from .kcat import missing
        return missing()
    if name == "kafkajs":
        from .kafkajs import missing
        return missing()
    return None


def make_client(name: str, bootstrap: str) -> Client:
    if name.startswith("java"):
        from .java import JavaClient
        return JavaClient(bootstrap, name)
    if name == "confluent-kafka":
        from .confluent import ConfluentClient
        return ConfluentClient(bootstrap)
    if name == "kcat":
        from .kcat import KcatClient
        return KcatClient(bootstrap)
    if name == "kafka-python":
        from .kafka_python import KafkaPythonClient
        return KafkaPythonClient(bootstrap)
    if name == "aiokafka":
        from .aiokafka_client import AiokafkaClient
        return AiokafkaClient(bootstrap)
    if name == "kafkajs":
        from .kafkajs import KafkaJsClient
        return KafkaJsClient(bootstrap)
    raise ValueError(name)


__all__ = ["CLIENTS", "COMPRESSIONS", "Client", "ClientError", "Delivery", "PollResult", "Unsupported", "make_client", "unavailable"]
