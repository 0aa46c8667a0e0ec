"""What a night's process does about its allocators, so that its resident size follows what it holds rather than the
most it ever held (docs/performance.md "The night's resident size"). Python's own collector is set in
billing/jobs/run.py (collect_garbage_for_a_night)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache


def strings_in_malloc() -> None:
    """Where pyarrow is installed (the `parquet` extra), pandas keeps a frame's strings in Arrow arrays, which
    Arrow takes from mimalloc by default. The threads that ask a day's chunks each build frames, and mimalloc
    keeps each thread's pages after its frames are gone: at 20,000 pods some 30 MB of a night's peak resident
    size for a few MB of strings (docs/performance.md "The client's share"). From the C library's malloc, the next
    allocation reuses them. Without pyarrow, pandas holds strings as Python objects and this changes nothing."""
    try:
        import pyarrow
    except ImportError:
        return
    pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def free_pages_to_the_system() -> None:
    """Hand the C library's wholly free pages back to the system. A chunk's answers are parsed into objects that live
    only until the chunk is summed; the C library keeps the pages they freed, and with what lives on scattered
    among them, the next chunk's seldom fit there, so the heap grows chunk by chunk: at 50,000 pods 155 MB at the
    end of the collection, 107 MB of it free and resident. glibc's malloc_trim returns every free page, not only
    the heap's top (a few milliseconds). Nothing where the C library has no such call (musl, macOS)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
