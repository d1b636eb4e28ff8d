import itertools

import pytest

from protocol import records as r
from storage.config import LogConfig
from storage.log import Log

NOW = 1_700_000_000_000


class Clock:
    def __init__(self, now=NOW):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


def batch(n=1, *, value_size=10, ts=NOW, key=None, **kw):
    recs = [r.SimpleRecord(value=b"v" * value_size, key=key, timestamp=ts + i) for i in range(n)]
    return r.build_batch(recs, **kw)


@pytest.fixture
def make_log(tmp_path, clock):
    counter = itertools.count()

    def make(config=None, name=None, **kw):
        directory = tmp_path / (name or f"topic-{next(counter)}")
        cfg = config if isinstance(config, LogConfig) else LogConfig.from_mapping(config or {})
        return Log(str(directory), cfg, clock=clock, **kw)

    return make
