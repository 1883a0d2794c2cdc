"""Blocking work from async code: file I/O runs in worker threads so the
event loop keeps serving. The sync client uses _sio, whose functions of the
same names simply call."""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable, Iterator, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")

sleep = anyio.sleep


def shielded() -> anyio.CancelScope:
    """A scope in which clean-up finishes even when the task is cancelled."""
    return anyio.CancelScope(shield=True)


async def run_sync(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in a worker thread."""
    return await anyio.to_thread.run_sync(fn, *args)


async def iterate(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Pull each item of a blocking iterator in a worker thread."""
    done = object()
    while True:
        chunk = await anyio.to_thread.run_sync(next, chunks, done)
        if chunk is done:
            return
        yield chunk  # type: ignore[misc]
