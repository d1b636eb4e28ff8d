"""The one interface every client adapter implements, so each scenario is written once for all clients.

Every call is bounded in time (`timeout` seconds). A capability the client's own API lacks raises
`Unsupported(reason)`, which the tests turn into a skip with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..records import Rec


class Unsupported(Exception):
    """The client's API cannot express this operation (the reason goes into the matrix)."""


class ClientError(Exception):
    """The client reported an error; the message is the client's own."""


@dataclass
class Delivery:
    """The outcome of one produced record: its partition/offset (None where the client does not tell) or error."""
    partition: int | None = None
    offset: int | None = None
    error: str | None = None


@dataclass
class PollResult:
    records: list[Rec] = field(default_factory=list)
    assignment: list[int] = field(default_factory=list)
    assigned_events: int = 0
    revoked_events: int = 0


COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


class Client:
    name = "?"
    reports_cluster_id = True   # kcat's metadata listing has no cluster id
    commit_metadata = True      # whether committed offsets can carry a metadata string
    no_offset_is_latest = False  # offsets_for_times reports "none after this time" as the latest offset
    survives_disconnects = True  # reconnects after the broker drops a connection (kcat terminates instead)

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def close(self) -> None:
        pass

    # -- admin --
    def metadata(self) -> dict:
        """{"cluster_id", "controller_id", "brokers": [{"id", "host", "port"}], "topics": [names]}"""
        raise Unsupported(f"{self.name} has no cluster metadata API")

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        raise Unsupported(f"{self.name} has no admin API to create topics")

    def partition_count(self, topic: str) -> int:
        raise Unsupported(f"{self.name} cannot describe topics")

    def describe_configs(self, topic: str) -> dict[str, str | None]:
        raise Unsupported(f"{self.name} has no DescribeConfigs API")

    def create_partitions(self, topic: str, total: int) -> None:
        raise Unsupported(f"{self.name} has no CreatePartitions API")

    def delete_topic(self, topic: str) -> None:
        raise Unsupported(f"{self.name} has no DeleteTopics API")

    # -- produce / consume --
    def produce(self, topic: str, records: list[Rec], *, acks: str = "all", compression: str = "none",
                idempotent: bool | None = None, linger_ms: int = 5, timeout: float = 60) -> list[Delivery]:
        raise NotImplementedError

    def consume(self, topic: str, *, partitions: list[int] | None = None, start: dict[int, int] | None = None,
                isolation: str = "read_uncommitted", timeout: float = 30) -> list[Rec]:
        """Everything from `start` (default: earliest) up to the end offsets seen when the call starts."""
        raise NotImplementedError

    def offsets_for_times(self, topic: str, partition: int, timestamps: list[int]) -> list[int | None]:
        raise Unsupported(f"{self.name} cannot look up offsets by timestamp")

    def list_offsets(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """{partition: (earliest, latest)}"""
        raise Unsupported(f"{self.name} cannot list offsets")

    def commit(self, group: str, topic: str, offsets: dict[int, tuple[int, str]]) -> None:
        raise Unsupported(f"{self.name} cannot commit explicit offsets")

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, tuple[int, str] | None]:
        raise Unsupported(f"{self.name} cannot fetch committed offsets")

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """All committed offsets of a group, every topic (OffsetFetch with no topic list)."""
        raise Unsupported(f"{self.name} cannot list a group's offsets")

    # -- consumer groups (a member is an opaque handle) --
    def group_open(self, group: str, topic: str, *, instance_id: str | None = None,
                   assignor: str = "range", session_timeout_ms: int = 10000) -> object:
        raise Unsupported(f"{self.name} has no group consumer")

    def group_poll(self, member: object, timeout_ms: int = 200) -> PollResult:
        raise NotImplementedError

    def group_commit(self, member: object) -> None:
        raise NotImplementedError

    def group_close(self, member: object) -> None:
        raise NotImplementedError

    # -- transactions --
    def txn_produce(self, topic: str, transactional_id: str, batches: list[tuple[list[Rec], bool]]) -> None:
        """Each batch is one transaction: (records, commit?)."""
        raise Unsupported(f"{self.name} has no transactional producer")

    def txn_open(self, topic: str, transactional_id: str, records: list[Rec]) -> object:
        """Begins a transaction, sends and flushes the records, and leaves it open; returns a handle."""
        raise Unsupported(f"{self.name} has no transactional producer")

    def txn_close(self, handle: object, commit: bool) -> None:
        raise NotImplementedError

    def consume_transform_produce(self, in_topic: str, out_topic: str, group: str, transactional_id: str,
                                  count: int, timeout: float = 60) -> int:
        """Reads `count` committed records as `group`, writes their values upper-cased to out_topic with the
        consumed offsets sent to the same transaction; returns how many it processed."""
        raise Unsupported(f"{self.name} cannot send offsets to a transaction")
