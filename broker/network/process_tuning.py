"""What the broker tunes in its process: the garbage collector, glibc's malloc thresholds and
malloc_trim, and the open files limit."""
from __future__ import annotations

import gc
import resource


def _libc():
    """glibc by its soname, or None on another libc (what is tuned here is glibc's). Not
    ctypes.util.find_library: on Linux it runs ``ldconfig -p`` in a new process, at every start
    of the broker."""
    try:
        import ctypes
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


#: glibc's malloc_trim once looked up (None: not glibc): glibc keeps memory that was freed (its
#: mmap threshold grows with the largest block freed, so large answers end up in the heap), and
#: a process that once held the answers of hundreds of stalled clients would keep that RSS after
#: they left
_malloc_trim = None
_looked_up = False


def trim_malloc() -> None:
    """Give the memory glibc keeps back to the system (nothing on another libc)."""
    global _malloc_trim, _looked_up
    if not _looked_up:
        _looked_up = True
        _malloc_trim = getattr(_libc(), "malloc_trim", None)
    if _malloc_trim is not None:
        _malloc_trim(0)


#: memory goes back to the system this long after the last connection that held much closed
TRIM_DELAY_MS = 1000
#: mallopt's parameters (glibc's malloc.h) and what the broker's own process sets them to
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest on 64-bit
TRIM_THRESHOLD = 64 * 1024 * 1024


def tune_malloc() -> None:
    """For a broker that has its process to itself (the command line, not the embedded
    broker): blocks up to 32 MiB come from glibc's heap and up to 64 MiB freed at its top stay
    there, instead of being mapped and unmapped request by request. A 6-partition Fetch from
    --data-dir reads ~1 MB per partition; with glibc's defaults each read got fresh pages, and
    perf showed page faults, page zeroing and TLB shootdowns as ~30% of the broker's CPU; the
    broker's CPU per MB fetched fell by about 45% with these. Memory still goes back to the
    system after clients that held much close (malloc_trim, TRIM_DELAY_MS)."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return  # not glibc
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)


#: CPython's cyclic collector runs a young collection every 700 net allocations of container
#: objects by default, and a full one every 100 young ones (about every 70,000 allocations, a
#: burst of a thousand joins): each full one walked every group, member, timer and codec the
#: broker holds (17 ms with a thousand members). Requests, answers and delayed operations are
#: freed by reference counting the moment they are done; collecting less often only lets the
#: rare cyclic garbage wait longer.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    """For a broker that has its process to itself, once it has started: what start-up made
    (modules, message codecs, configuration, the coordinator shards) lives as long as the
    process, so it moves out of the collector's sight (gc.freeze), and collections run
    GC_THRESHOLDS apart."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def raise_open_files_limit() -> None:
    """Let the soft limit of open files reach the hard one, as the JVM does at start: with
    max.connections unlimited (Kafka's default) a default soft limit of 1024 would be the real
    connection limit."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
