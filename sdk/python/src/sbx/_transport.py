"""What the sync and async HTTP layers share: client settings, timeouts and
the translation of httpx's exceptions into the SDK's."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional, Union

import httpx

from ._errors import ConnectError, ProtocolError, RequestTimeoutError
from ._version import __version__
from ._wire import Endpoint

#: Seconds to wait for a connection, whatever the call.
CONNECT_TIMEOUT_S = 10.0


class _Default:
    """The client's default timeout (the marker of an argument not given)."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default()
#: A per-call timeout: seconds, None for no read deadline, or the client's default.
Timeout = Union[float, None, _Default]


def http_timeout(value: Optional[float]) -> httpx.Timeout:
    """An httpx timeout: ``value`` seconds for reads and writes (None: none),
    never more than CONNECT_TIMEOUT_S to connect."""
    connect = CONNECT_TIMEOUT_S if value is None else min(value, CONNECT_TIMEOUT_S)
    return httpx.Timeout(value, connect=connect)


def client_options(ep: Endpoint, token: Optional[str], timeout: Optional[float]) -> dict[str, object]:
    """The keyword arguments of httpx.Client/AsyncClient for a server."""
    headers = {"User-Agent": f"sbx-python/{__version__}"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return {
        "base_url": ep.base_url,
        "headers": headers,
        "timeout": http_timeout(timeout),
        "follow_redirects": False,
        "trust_env": False,
    }


@contextmanager
def translated(where: str, what: str) -> Iterator[None]:
    """Turn httpx's transport exceptions inside the block into the SDK's:
    timeouts into RequestTimeoutError, connection failures into
    ConnectError, malformed HTTP into ProtocolError."""
    try:
        yield
    except httpx.TimeoutException as e:
        raise RequestTimeoutError(f"{what}: no answer from the sbx server at {where} in time ({type(e).__name__})") from e
    except (httpx.ConnectError, httpx.ConnectTimeout) as e:
        raise ConnectError(f"{what}: cannot reach the sbx server at {where}: {e} (is sbx serve running there?)") from e
    except (httpx.NetworkError, httpx.RemoteProtocolError) as e:
        raise ConnectError(f"{what}: the connection to the sbx server at {where} failed: {e}") from e
    except httpx.DecodingError as e:
        raise ProtocolError(f"{what}: the server's reply could not be decoded: {e}") from e
