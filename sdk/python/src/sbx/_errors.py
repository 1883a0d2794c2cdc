"""The exceptions of the sbx SDK.

Every error the server or a sandbox's executor reports is an :class:`APIError`
whose class follows the REST error code (``{"error": {"code", "message"}}``),
so callers catch exactly what they mean::

    try:
        sb.files.read("/etc/nope")
    except FileNotFoundError:        # sbx.NoSuchFileError is one
        ...
    except sbx.LimitError as e:      # 429: the server is full
        time.sleep(e.retry_after or 1)

Failures of the connection itself are :class:`ConnectError` (also a
``ConnectionError``) and :class:`RequestTimeoutError` (also a
``TimeoutError``). A command that runs past its ``timeout`` raises
:class:`CommandTimeoutError`, and with ``check=True`` a non-zero exit raises
:class:`CommandError`; both carry the command's result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._models import ExecResult

__all__ = [
    "SbxError",
    "ConnectError",
    "RequestTimeoutError",
    "ProtocolError",
    "CommandError",
    "CommandTimeoutError",
    "APIError",
    "BadRequestError",
    "UnauthorizedError",
    "NotFoundError",
    "NoSuchFileError",
    "MethodNotAllowedError",
    "ConflictError",
    "TooLargeError",
    "InvalidError",
    "ForbiddenError",
    "LimitError",
    "InternalError",
    "BadGatewayError",
    "UnavailableError",
    "RegistryAuthError",
    "RegistryUnreachableError",
    "NotRegularFileError",
    "ExistsError",
    "IsDirectoryError",
    "BinaryFileError",
    "NoMatchError",
    "MultipleMatchesError",
    "InvalidRangeError",
    "NoHistoryError",
    "NotRunningError",
    "BusyError",
    "UnsafePathError",
    "ShuttingDownError",
]


class SbxError(Exception):
    """Base class of every exception the SDK raises."""


class ConnectError(SbxError, ConnectionError):
    """The server could not be reached (no socket, connection refused, TLS
    failure) or dropped the connection before it answered."""


class RequestTimeoutError(SbxError, TimeoutError):
    """The server did not answer within the client's deadline. The request
    may still complete on the server."""


class ProtocolError(SbxError):
    """The server sent a reply the SDK cannot accept: malformed, of the wrong
    type, or larger than the SDK's cap for it."""


class CommandError(SbxError):
    """A command exited non-zero and the caller asked for ``check=True``, like
    :class:`subprocess.CalledProcessError`. ``result`` holds its output."""

    def __init__(self, result: ExecResult, cmd: str) -> None:
        self.result = result
        self.cmd = cmd
        super().__init__(f"command {cmd} exited with code {result.exit_code}")


class CommandTimeoutError(SbxError, TimeoutError):
    """A command ran past its ``timeout`` and was killed, like
    :class:`subprocess.TimeoutExpired`. ``result`` holds what it printed."""

    def __init__(self, result: ExecResult, cmd: str, timeout: float) -> None:
        self.result = result
        self.cmd = cmd
        self.timeout = timeout
        super().__init__(f"command {cmd} timed out after {timeout:g} seconds and was killed")


class APIError(SbxError):
    """An error reply of the server or of a sandbox's executor.

    Attributes: ``status`` (the HTTP status), ``code`` (the error code of the
    body, e.g. ``"not_found"``), ``message`` (what failed and what to do) and
    ``body`` (the decoded error object)."""

    #: The error code this class stands for ("" for the base class).
    code_name = ""

    def __init__(self, status: int, code: str, message: str, body: dict[str, Any] | None = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.body = body or {}
        # Errors reported inside a stream (status 0) came after a 200.
        where = f"{code}, HTTP {status}" if status else code
        super().__init__(f"{message} ({where})")


class BadRequestError(APIError):
    """400: malformed request, bad parameters or an ambiguous id prefix."""

    code_name = "bad_request"


class UnauthorizedError(APIError):
    """401: no token, or the wrong one."""

    code_name = "unauthorized"


class NotFoundError(APIError, LookupError):
    """404: no such sandbox, image, session, file or route."""

    code_name = "not_found"


class NoSuchFileError(NotFoundError, FileNotFoundError):
    """404 of a file operation: the path does not exist in the sandbox."""


class MethodNotAllowedError(APIError):
    """405: the route exists with another method."""

    code_name = "method_not_allowed"


class ConflictError(APIError):
    """409: name in use, sandbox busy, or in the wrong state (exec in a stopped
    or paused sandbox, a remove without force of a running one)."""

    code_name = "conflict"


class TooLargeError(APIError):
    """413: a request body or a file over the server's or executor's cap."""

    code_name = "too_large"


class InvalidError(APIError, ValueError):
    """422: well-formed options the server rejects."""

    code_name = "invalid"


class ForbiddenError(APIError, PermissionError):
    """422: options the server's policy forbids (host paths, host network,
    privileges)."""

    code_name = "forbidden"


class LimitError(APIError):
    """429: a sandbox count, memory budget or concurrency limit was reached;
    ``retry_after`` is the server's hint in seconds, or None."""

    code_name = "limit"
    retry_after: float | None = None


class InternalError(APIError):
    """500: the server failed."""

    code_name = "internal"


class BadGatewayError(APIError):
    """502/504: the sandbox's executor failed, sent too much, or ran past the
    server's proxy timeout."""

    code_name = "bad_gateway"


class UnavailableError(APIError):
    """503: the server is shutting down, or the feature is not configured."""

    code_name = "unavailable"


class RegistryAuthError(APIError):
    """502: the registry refused the server's credentials during a pull."""

    code_name = "registry_auth"


class RegistryUnreachableError(APIError):
    """502: the registry could not be reached during a pull."""

    code_name = "registry_unreachable"


class NotRegularFileError(APIError, OSError):
    """A read of a FIFO, device or socket."""

    code_name = "not_regular_file"


class ExistsError(APIError, FileExistsError):
    """The editor's create on a path that exists."""

    code_name = "exists"


class IsDirectoryError(APIError, IsADirectoryError):
    """A file operation on a directory."""

    code_name = "is_directory"


class BinaryFileError(APIError, ValueError):
    """An edit or line-range read of a binary file."""

    code_name = "binary_file"


class NoMatchError(APIError, ValueError):
    """``str_replace`` found its old text nowhere."""

    code_name = "no_match"


class MultipleMatchesError(APIError, ValueError):
    """``str_replace`` found its old text more than once; ``lines`` are the
    1-based lines of the matches."""

    code_name = "multiple_matches"

    @property
    def lines(self) -> list[int]:
        """The 1-based line numbers of the matches."""
        lines = self.body.get("lines")
        return [n for n in lines if isinstance(n, int)] if isinstance(lines, list) else []


class InvalidRangeError(APIError, ValueError):
    """A view range, insert line or line range out of bounds."""

    code_name = "invalid_range"


class NoHistoryError(APIError):
    """``undo_edit`` without an earlier version."""

    code_name = "no_history"


class NotRunningError(APIError):
    """Reading output of, or sending input to, a session with no running
    command."""

    code_name = "not_running"


class BusyError(APIError):
    """Another call already waits on the session."""

    code_name = "busy"


class UnsafePathError(APIError, ValueError):
    """An archive entry that would land outside its directory."""

    code_name = "unsafe_path"


class ShuttingDownError(APIError):
    """The sandbox's executor is stopping."""

    code_name = "shutting_down"


_BY_CODE: dict[str, type[APIError]] = {
    cls.code_name: cls
    for cls in (
        BadRequestError,
        UnauthorizedError,
        NotFoundError,
        MethodNotAllowedError,
        ConflictError,
        TooLargeError,
        InvalidError,
        ForbiddenError,
        LimitError,
        InternalError,
        BadGatewayError,
        UnavailableError,
        RegistryAuthError,
        RegistryUnreachableError,
        NotRegularFileError,
        ExistsError,
        IsDirectoryError,
        BinaryFileError,
        NoMatchError,
        MultipleMatchesError,
        InvalidRangeError,
        NoHistoryError,
        NotRunningError,
        BusyError,
        UnsafePathError,
        ShuttingDownError,
    )
}

# Classes for replies whose body carries no known code.
_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    413: TooLargeError,
    422: InvalidError,
    429: LimitError,
    500: InternalError,
    502: BadGatewayError,
    503: UnavailableError,
    504: BadGatewayError,
}


def error_class(status: int, code: str, *, file_op: bool = False) -> type[APIError]:
    """The exception class for an error reply: by code, else by status. In a
    file operation a ``not_found`` is a :class:`NoSuchFileError`."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status, APIError)
    if file_op and cls is NotFoundError:
        return NoSuchFileError
    return cls
