"""Open-file handles shared between the log and in-flight reads, and the LRU that bounds them.

A `SharedFile` closes its descriptor when the last reference goes away, so
evicting a segment from the `OpenFiles` LRU (or deleting it) never closes a
descriptor under a `FileSlice` that a Fetch response is still sending.
"""

from __future__ import annotations

import collections
import os
import threading


class SharedFile:
    """An OS file descriptor closed when no longer referenced."""

    __slots__ = ("fd", "path", "__weakref__")

    def __init__(self, path: str, flags: int = os.O_RDWR | os.O_CREAT):
        self.path = path
        self.fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)

    def fileno(self) -> int:
        return self.fd

    def __del__(self):
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


class FileSlice:
    """A byte range of a segment file, ready for os.sendfile.

    `len(slice)` is the byte count; `fileno()`, `position` and `length` are what
    sendfile needs; `read()` returns the bytes (tests, non-sendfile transports).
    The slice keeps its descriptor open for as long as it lives.
    """

    __slots__ = ("file", "position", "length")

    def __init__(self, file: SharedFile, position: int, length: int):
        self.file = file
        self.position = position
        self.length = length

    @property
    def path(self) -> str:
        return self.file.path

    def fileno(self) -> int:
        return self.file.fd

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        data = os.pread(self.file.fd, self.length, self.position)
        if len(data) != self.length:
            raise OSError(f"short read from {self.path}: {len(data)} of {self.length} bytes")
        return data

    def __repr__(self) -> str:
        return f"FileSlice({self.path!r}, position={self.position}, length={self.length})"


class OpenFiles:
    """LRU of segments holding descriptors/mappings; evicting one calls its release()."""

    def __init__(self, capacity: int = 1024):
        self.capacity = max(4, capacity)
        self._lru: collections.OrderedDict[int, object] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._newest = None

    def touch(self, holder) -> None:
        if self._newest is holder:  # the common case: the same segment again
            return
        evicted = []
        with self._lock:
            self._newest = holder
            key = id(holder)
            if key in self._lru:
                self._lru.move_to_end(key)
                return
            self._lru[key] = holder
            while len(self._lru) > self.capacity:
                _, old = self._lru.popitem(last=False)
                evicted.append(old)
        for old in evicted:
            old.release()

    def forget(self, holder) -> None:
        with self._lock:
            if self._newest is holder:
                self._newest = None
            self._lru.pop(id(holder), None)

    def __len__(self) -> int:
        return len(self._lru)
