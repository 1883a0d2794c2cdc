"""The HTTP layer of the client: one httpx client per server,
replies read within caps, errors turned into the SDK's exceptions.

The sync twin in ../_sync/ is generated from this file by
sdk/python/scripts/gen_sync.py.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import asynccontextmanager
from types import TracebackType
from typing import IO, Any, AsyncGenerator, AsyncIterator, Mapping, Optional, Sequence, TypeVar, Union

import httpx

from .. import _aio
from .._errors import ProtocolError
from .._lease import LeaseKeeper
from .._transport import DEFAULT, Timeout, client_options, http_timeout, translated
from .._wire import MAX_JSON_BYTES, MAX_LINE_BYTES, Frame, api_error, decode_frame, decode_json, endpoint


Self = TypeVar("Self", bound="AsyncClosing")


class AsyncClosing:
    """Use as a context manager: ``aclose`` runs at the end of the block."""

    async def aclose(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    async def __aenter__(self: Self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.aclose()


class AsyncHTTP:
    """One connection pool to one sbx server."""

    def __init__(
        self, host: Optional[str], token: Optional[str], timeout: Optional[float], verify: bool | str, lease: Optional[float] = None
    ) -> None:
        ep = endpoint(host)
        self.where = f"unix://{ep.uds}" if ep.uds else ep.base_url
        transport = httpx.AsyncHTTPTransport(uds=ep.uds, verify=verify, retries=0)
        self.client = httpx.AsyncClient(transport=transport, **client_options(ep, token, timeout))  # type: ignore[arg-type]
        #: The lease of a sandbox created without one, in seconds (None: no lease).
        self.lease = lease
        #: Renews the leases of the sandboxes this client created.
        self.leases = LeaseKeeper(ep, token, verify)

    async def aclose(self) -> None:
        """Stop renewing leases and close every connection."""
        self.leases.close()
        await self.client.aclose()

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        what: str,
        params: Optional[Union[Mapping[str, Any], Sequence[tuple[str, str]]]] = None,
        json: Any = None,
        content: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Timeout = DEFAULT,
        file_op: bool = False,
    ) -> AsyncIterator[httpx.Response]:
        """Send a request and yield its response once the status is a
        success; an error reply is raised as its APIError. The body is read
        by the caller, and the connection closed when the block ends."""
        kwargs: dict[str, Any] = {"params": params, "json": json, "content": content, "headers": headers}
        if timeout is not DEFAULT:
            kwargs["timeout"] = http_timeout(timeout)  # type: ignore[arg-type]
        with translated(self.where, what):
            async with self.client.stream(method, path, **kwargs) as resp:
                if resp.status_code >= 400:
                    body = await read_capped(resp, 64 << 10, what, truncate=True)
                    raise api_error(resp.status_code, body, resp.headers, file_op=file_op)
                yield resp

    async def call(self, method: str, path: str, *, max_bytes: int = MAX_JSON_BYTES, raw: bool = False, **kw: Any) -> Any:
        """Send a request (the arguments of :meth:`stream`) and return its
        decoded JSON reply (None for an empty one), or with ``raw`` the
        reply's bytes, at most ``max_bytes`` of them."""
        what = kw["what"]
        async with self.stream(method, path, **kw) as resp:
            with translated(self.where, what):
                data = await read_capped(resp, max_bytes, what)
        if raw:
            return data
        return decode_json(data, what) if data.strip() else None


async def read_capped(resp: httpx.Response, limit: int, what: str, truncate: bool = False) -> bytes:
    """The body of ``resp``, at most ``limit`` bytes: more is a
    ProtocolError, or cut with ``truncate``."""
    buf = bytearray()
    async for chunk in resp.aiter_bytes():
        buf += chunk
        if len(buf) > limit:
            if truncate:
                return bytes(buf[:limit])
            raise ProtocolError(f"{what}: the reply is larger than {limit} bytes")
    return bytes(buf)


async def ndjson(resp: httpx.Response, what: str) -> AsyncGenerator[Frame, None]:
    """The objects of an NDJSON body, one per line, each at most
    MAX_LINE_BYTES long."""
    buf = bytearray()
    async for chunk in resp.aiter_bytes():
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line, buf = bytes(buf[:nl]), buf[nl + 1 :]
            if line.strip():
                yield decode_frame(line, what)
        if len(buf) > MAX_LINE_BYTES:
            raise ProtocolError(f"{what}: a line of the reply is longer than {MAX_LINE_BYTES} bytes")
    if buf.strip():
        yield decode_frame(bytes(buf), what)



async def download_to(
    http: AsyncHTTP, dest: Union[str, os.PathLike[str], IO[bytes]], method: str, path: str, *, mode: int = 0o644, **kw: Any
) -> None:
    """Stream the body of a request (the arguments of :meth:`AsyncHTTP.stream`)
    into ``dest``: a local path of ``mode``, which appears only once the
    body is complete (a failure leaves nothing), or a binary file object."""
    if not isinstance(dest, (str, os.PathLike)):
        await _copy_body(http, dest, method, path, **kw)
        return
    target = os.fspath(dest)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(target)), prefix=".sbx-download-")
    try:
        with os.fdopen(fd, "wb") as f:
            await _copy_body(http, f, method, path, **kw)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


async def _copy_body(http: AsyncHTTP, out: IO[bytes], method: str, path: str, **kw: Any) -> None:
    async with http.stream(method, path, timeout=None, **kw) as resp:
        with translated(http.where, kw["what"]):
            async for chunk in resp.aiter_bytes():
                await _aio.run_sync(out.write, chunk)
