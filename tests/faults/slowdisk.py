"""Slow fsync on one node, switched on and off while it runs.

An LD_PRELOAD shim, compiled at test time with the system C compiler, wraps fsync, fdatasync,
syncfs and sync: before each it reads a small control file (``"<min_ms> <max_ms>"``; missing, empty
or ``0`` means no delay), sleeps a random time in that range, then makes the real system call. Every
delayed call appends one byte to ``<control>.hits``, so a trial can tell that the fault bit.
Nodes start with the shim loaded and the delay off; the nemesis writes the control file, so no
restart is needed (a restart would itself be a fault).

The shim interposes the libc wrappers that Python's ``os.fsync``/``os.fdatasync`` call; it issues the
system calls itself, so it needs no ``dlsym`` and cannot recurse.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

CONTROL_ENV = "ODRADEK_FAULTS_FSYNC_CONTROL"

SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void fault_delay(void) {
    const char *control = getenv("ODRADEK_FAULTS_FSYNC_CONTROL");
    if (control == NULL) return;
    int saved = errno;
    char text[64] = {0};
    int fd = (int) syscall(SYS_openat, AT_FDCWD, control, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { errno = saved; return; }
    ssize_t got = syscall(SYS_read, fd, text, sizeof text - 1);
    syscall(SYS_close, fd);
    long low = 0, high = 0;
    if (got <= 0 || sscanf(text, "%ld %ld", &low, &high) < 1 || low <= 0) { errno = saved; return; }
    if (high < low) high = low;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    unsigned seed = (unsigned) (now.tv_nsec ^ now.tv_sec ^ (long) getpid());
    long ms = low + (high > low ? (long) (rand_r(&seed) % (high - low + 1)) : 0);
    char hits[512];
    snprintf(hits, sizeof hits, "%s.hits", control);
    fd = (int) syscall(SYS_openat, AT_FDCWD, hits, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) { syscall(SYS_write, fd, "x", 1); syscall(SYS_close, fd); }
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {}
    errno = saved;
}

int fsync(int fd) { fault_delay(); return (int) syscall(SYS_fsync, fd); }
int fdatasync(int fd) { fault_delay(); return (int) syscall(SYS_fdatasync, fd); }
int syncfs(int fd) { fault_delay(); return (int) syscall(SYS_syncfs, fd); }
void sync(void) { fault_delay(); syscall(SYS_sync); }
"""


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


class SlowFsyncShim:
    """The compiled shim in a temporary directory of its own, removed by `close()`."""

    def __init__(self):
        cc = compiler()
        if cc is None:
            raise RuntimeError("no C compiler (cc/gcc) for the slow-fsync shim")
        self.directory = tempfile.mkdtemp(prefix="odradek-faults-fsync-")
        try:
            source = os.path.join(self.directory, "slowfsync.c")
            self.library = os.path.join(self.directory, "slowfsync.so")
            with open(source, "w") as handle:
                handle.write(SHIM_SOURCE)
            done = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", self.library, source],
                                  capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"compiling the slow-fsync shim failed: {done.stderr.strip()}")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def set_delay(control: str, low_ms: int, high_ms: int | None = None) -> None:
    """Every fsync of the process reading `control` sleeps low..high ms (0: no delay) from now on."""
    temporary = control + ".new"
    with open(temporary, "w") as handle:
        handle.write(f"{low_ms} {high_ms if high_ms is not None else low_ms}\n")
    os.replace(temporary, control)          # the shim never reads a half-written file


def hits(control: str) -> int:
    """How many calls the shim has delayed so far."""
    try:
        return os.path.getsize(control + ".hits")
    except FileNotFoundError:
        return 0
