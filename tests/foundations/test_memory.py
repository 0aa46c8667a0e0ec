"""A night's allocators (billing/memory.py): Arrow's strings from malloc, free pages handed back."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from billing import memory

MB = 1 << 20


def test_a_nights_strings_come_from_malloc_and_are_the_same_strings():
    """Where pyarrow is installed, frames' strings are Arrow arrays; after strings_in_malloc their buffers come from
    the C library's malloc, not from mimalloc's per-thread heaps."""
    pyarrow = pytest.importorskip("pyarrow")
    before = pyarrow.default_memory_pool()
    try:
        memory.strings_in_malloc()
        assert pyarrow.default_memory_pool().backend_name == "system"
        frame = pd.DataFrame({"namespace": ["alice", "bob"] * 3})
        assert frame.groupby("namespace").size().to_dict() == {"alice": 3, "bob": 3}
    finally:
        pyarrow.set_memory_pool(before)


def resident_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def test_the_free_pages_among_what_lives_on_go_back_to_the_system():
    """As a chunk's answers leave it: 96 MB of 1 kB objects (from malloc: Python keeps only objects of up to 512
    bytes itself), of which one in 64 lives on, so no page at the heap's top is free and the C library's own
    trimming gives nothing back; handed back, the free pages between them leave the resident size."""
    if memory._malloc_trim() is None:
        pytest.skip("this C library has no malloc_trim (not glibc): free_pages_to_the_system does nothing here")
    parsed = [bytes(1000) + bytes([n % 256]) for n in range(96 * 1024)]
    kept = parsed[::64]
    del parsed
    before = resident_mb()
    memory.free_pages_to_the_system()
    assert before - resident_mb() > 48
    assert len(kept) == 1536 and all(len(one) == 1001 for one in kept)
