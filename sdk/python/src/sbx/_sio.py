"""The sync twins of _aio's helpers: in sync code blocking work simply
runs."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Callable, Iterator, TypeVar

T = TypeVar("T")

sleep = time.sleep


def shielded() -> AbstractContextManager[None]:
    """Nothing to shield in sync code."""
    return nullcontext()


def run_sync(fn: Callable[..., T], *args: Any) -> T:
    """Call ``fn(*args)``."""
    return fn(*args)


def iterate(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The iterator itself."""
    return chunks
