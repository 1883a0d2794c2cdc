"""The Python SDK of sbx: sandboxes on an ``sbx serve`` server.

::

    from sbx import Client

    with Client("unix:///run/sbx/sbx.sock") as c:
        with c.sandboxes.create("python:3.12", memory="512m", ttl="1h") as sb:
            print(sb.exec(["python3", "-c", "print(6*7)"]).stdout)

:class:`Client` is synchronous; :class:`AsyncClient` has the same methods as
coroutines (asyncio or trio, through anyio). Errors are the exceptions in
this module, named after the server's error codes; see docs/python.md.
"""

from ._async.client import AsyncClient, AsyncEventStream, AsyncImages, AsyncPools, AsyncSandboxes, AsyncSnapshots, AsyncVolumes
from ._async.sandbox import AsyncExecStream, AsyncFiles, AsyncPortConnection, AsyncSandbox, AsyncSession
from ._errors import (
    APIError,
    BadGatewayError,
    BadRequestError,
    BinaryFileError,
    BusyError,
    CommandError,
    CommandTimeoutError,
    ConflictError,
    ConnectError,
    ExistsError,
    ForbiddenError,
    InternalError,
    InvalidError,
    InvalidRangeError,
    IsDirectoryError,
    LimitError,
    MethodNotAllowedError,
    MultipleMatchesError,
    NoHistoryError,
    NoMatchError,
    NoSuchFileError,
    NotFoundError,
    NotRegularFileError,
    NotRunningError,
    ProtocolError,
    RegistryAuthError,
    RegistryUnreachableError,
    RequestTimeoutError,
    SbxError,
    ShuttingDownError,
    TooLargeError,
    UnauthorizedError,
    UnavailableError,
    UnsafePathError,
)
from ._models import (
    ArchiveResult,
    BuildPruneReport,
    BuildResult,
    Change,
    CmdStart,
    DiskUsage,
    EgressAudit,
    Event,
    ExecResult,
    ExecutorInfo,
    Exit,
    FileEntry,
    GCReport,
    Health,
    HostInfo,
    Image,
    ImageDetail,
    ImageGCReport,
    ImageHistoryStep,
    Listing,
    LogFrame,
    LogOutput,
    OutputChunk,
    Pool,
    PoolReport,
    PreparedImage,
    ProcessInfo,
    PruneReport,
    PullProgress,
    Report,
    SandboxRecord,
    SessionInfo,
    SessionResult,
    Snapshot,
    Stats,
    Tmpfs,
    Volume,
    NamedVolume,
    VolumeInfo,
    VolumePruneReport,
)
from ._sync.client import Client, EventStream, Images, Pools, Sandboxes, Snapshots, Volumes
from ._sync.sandbox import ExecStream, Files, PortConnection, Sandbox, Session
from ._units import duration_seconds, go_duration, parse_size
from ._version import __version__
from . import _errors, _models  # noqa: E402  (their __all__ below)

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "Sandboxes",
    "AsyncSandboxes",
    "Sandbox",
    "AsyncSandbox",
    "Session",
    "AsyncSession",
    "Files",
    "AsyncFiles",
    "ExecStream",
    "AsyncExecStream",
    "PortConnection",
    "AsyncPortConnection",
    "Images",
    "AsyncImages",
    "Pools",
    "AsyncPools",
    "Snapshots",
    "AsyncSnapshots",
    "Volumes",
    "AsyncVolumes",
    "EventStream",
    "AsyncEventStream",
    "parse_size",
    "duration_seconds",
    "go_duration",
    *_models.__all__,
    *_errors.__all__,
]
