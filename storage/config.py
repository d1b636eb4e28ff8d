"""LogConfig: the topic-level settings a partition log honours, with Kafka's names and defaults."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

LONG_MAX = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000   # -1: keep forever
    retention_bytes: int = -1                  # -1: no size limit
    cleanup_policy: tuple = ("delete",)
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600 * 1000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60 * 1000
    producer_id_expiration_ms: int = 24 * 3600 * 1000  # a broker setting, honoured per log
    compression_type: str = "producer"  # or uncompressed/gzip/snappy/lz4/zstd: recompress on append

    def __post_init__(self):
        # Facts derived once (plain attributes, not properties: every append reads them);
        # dataclasses.replace() runs __init__ again, so they follow any change.
        object.__setattr__(self, "compact", "compact" in self.cleanup_policy)
        object.__setattr__(self, "delete", "delete" in self.cleanup_policy)
        object.__setattr__(self, "log_append_time", self.message_timestamp_type == "LogAppendTime")

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any] | None = None, base: "LogConfig | None" = None) -> "LogConfig":
        """Kafka topic config names ("segment.bytes", ...) -> LogConfig, over `base`.

        Values may be strings (as sent on the wire) or parsed values; names this
        layer does not use (e.g. unclean.leader.election.enable) are ignored, and a
        None value means "fall back to base".
        """
        base = base or cls()
        changes = {}
        for name, value in (settings or {}).items():
            field = _FIELDS.get(name)
            if field is None or value is None:
                continue
            changes[field] = _coerce(field, value)
        return dataclasses.replace(base, **changes)


_FIELDS = {f.name.replace("_", "."): f.name for f in dataclasses.fields(LogConfig)}


def _coerce(field: str, value: Any) -> Any:
    if field == "cleanup_policy":
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        return tuple(str(v).lower() for v in value)
    if field in ("message_timestamp_type", "compression_type"):
        return str(value)
    if field == "min_cleanable_dirty_ratio":
        return float(value)
    return int(value)
