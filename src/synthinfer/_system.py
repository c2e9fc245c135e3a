"""Facts about the machine the process runs on."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """CPU cores this process may run on: its affinity mask (``taskset``, a container's
    cpuset), not the machine's count that ``os.cpu_count()`` gives. (Python 3.13 has
    ``os.process_cpu_count``; this is its equivalent for 3.11.)"""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # platforms without affinity masks (macOS, Windows)
        return os.cpu_count() or 1


def total_memory_bytes() -> int | None:
    """Physical memory of the machine in bytes (``sysconf``), or None where it cannot be read."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # platforms without these sysconf names
        return None
