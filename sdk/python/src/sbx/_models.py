"""The typed results of the SDK, decoded from the server's JSON.

Replies are checked as they are decoded: a field of the wrong type is a
:class:`~sbx.ProtocolError`, never a half-filled object. Records keep the
whole decoded object in ``raw`` for fields this version does not know.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping, Optional, TypeVar, Union

from ._errors import ProtocolError
from ._units import parse_time

__all__ = [
    "Volume",
    "NamedVolume",
    "VolumeInfo",
    "VolumePruneReport",
    "Tmpfs",
    "Report",
    "ExecResult",
    "OutputChunk",
    "SessionInfo",
    "SessionResult",
    "FileEntry",
    "Listing",
    "ArchiveResult",
    "CmdStart",
    "SandboxRecord",
    "Stats",
    "Image",
    "ImageDetail",
    "ImageGCReport",
    "ImageHistoryStep",
    "Change",
    "DiskUsage",
    "PruneReport",
    "ProcessInfo",
    "LogFrame",
    "LogOutput",
    "Exit",
    "PreparedImage",
    "BuildPruneReport",
    "BuildResult",
    "PullProgress",
    "Event",
    "EgressAudit",
    "Health",
    "HostInfo",
    "GCReport",
    "Pool",
    "PoolReport",
    "Snapshot",
    "ExecutorInfo",
]

Json = Mapping[str, Any]
T = TypeVar("T")

# What a missing field of each type decodes to.
_ZERO: dict[Any, Callable[[], Any]] = {str: str, int: int, float: float, bool: bool, list: list, dict: dict}


def _obj(value: Any, what: str) -> Json:
    if not isinstance(value, Mapping):
        raise ProtocolError(f"{what}: the server sent {type(value).__name__}, want a JSON object")
    return value


def json_names(*names: str, required: bool = False) -> Any:
    """Field options: the JSON names a field is read from (the first one
    present wins), and whether it must be there."""
    return field(metadata={"json": names, "required": required})


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def decode(cls: type[T], value: Any) -> T:
    """A dataclass from a JSON object, each field read by its type: a value
    of the wrong type is a ProtocolError, a missing one the type's zero
    (None where the type is Optional). A field ``raw`` gets the whole
    object."""
    d = _obj(value, cls.__name__)
    hints = _hints(typing.cast(type, cls))
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name == "raw":
            kwargs["raw"] = dict(d)
            continue
        names = f.metadata.get("json", (f.name,))
        v = next((d[n] for n in names if d.get(n) is not None), None)
        if v is None and f.metadata.get("required"):
            raise ProtocolError(f"{cls.__name__}: the server sent no {names[0]!r}")
        kwargs[f.name] = _convert(hints[f.name], v, names[0])
    return cls(**kwargs)


def _convert(tp: Any, v: Any, key: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union:
        (inner,) = [a for a in args if a is not type(None)]
        return None if v is None or v == "" else _convert(inner, v, key)
    if tp is datetime:
        return parse_time(v)
    if v is None:
        if dataclasses.is_dataclass(tp):
            raise ProtocolError(f"the server sent no {key!r}")
        return _ZERO[origin or tp]()
    want = origin or tp
    if want is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if dataclasses.is_dataclass(tp):
        return tp.from_json(v)  # type: ignore[union-attr]
    if not isinstance(v, Mapping if want is dict else want) or (isinstance(v, bool) and want is not bool):
        raise ProtocolError(f"field {key!r}: the server sent {type(v).__name__} {v!r:.80}")
    if want is list:
        return [_convert(args[0], x, key) for x in v]
    if want is dict:
        return dict(v)
    return v


class _Decoded:
    """from_json for dataclasses decoded field by field (see decode)."""

    @classmethod
    def from_json(cls: type[T], value: Any) -> T:
        """Decode the server's JSON object."""
        return decode(cls, value)


@dataclass(frozen=True)
class Volume:
    """A directory of the server's host (``host_path``) mounted at ``path``
    inside the sandbox. The server must allow the directory
    (``sbx serve --allow-host-dir``). In a private user namespace the
    sandbox's files in it belong to its own host id range; ``idmap="host"``
    maps it back to the host's ids instead (its root then writes as host
    root: see docs/security.md)."""

    host_path: str
    path: str
    read_only: bool = False
    idmap: Optional[str] = None


@dataclass(frozen=True)
class NamedVolume:
    """The named volume ``name`` (:attr:`Client.volumes`; made when missing)
    mounted at ``path``: a directory the server keeps under its state root
    across sandboxes until removed, its files owned by the ids the
    sandboxes see. The string form is "NAME:PATH[:ro]"."""

    name: str
    path: str
    read_only: bool = False


@dataclass(frozen=True)
class VolumeInfo(_Decoded):
    """A named volume: its ``mountpoint`` on the server's host, when it was
    ``created``, its ``labels`` and the sandboxes (ids) that have it."""

    name: str = json_names("name", required=True)
    mountpoint: str = ""
    created: Optional[datetime] = None
    labels: dict[str, str] = field(default_factory=dict)
    used_by: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class VolumePruneReport(_Decoded):
    """The volumes :meth:`Volumes.prune` removed."""

    removed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Tmpfs:
    """An empty in-memory file system at ``path``, of at most ``size`` (bytes
    or a string such as "64m"; None: the server's default)."""

    path: str
    size: Optional[int | str] = None


@dataclass(frozen=True)
class Report(_Decoded):
    """How a command ended and what it used, in the spirit of isolate's meta
    file.

    ``status`` is ``ok``, ``nonzero_exit``, ``signaled``, ``oom`` (the
    kernel's OOM killer ended it) or ``timeout``.
    ``wall_time_s`` is the command's run time. The CPU times and the peak
    memory (the largest resident set) cover the command and the children it
    waited for; they are None when the server does not report them."""

    status: str
    exit_code: int
    signal: Optional[str]
    wall_time_s: float
    cpu_time_s: Optional[float]
    user_time_s: Optional[float]
    sys_time_s: Optional[float]
    memory_peak_bytes: Optional[int]
    timed_out: bool
    truncated: bool


@dataclass(frozen=True)
class ExecResult:
    """The result of :meth:`Sandbox.exec`: ``exit_code`` (128+n when signal
    n ended the command), ``stdout`` and ``stderr`` (text; bytes that are not
    UTF-8 became U+FFFD), ``signal`` (e.g. "SIGKILL", or None), ``timed_out``,
    ``truncated`` (output past ``max_output_bytes`` was cut in the middle),
    ``oom_killed`` (the kernel's OOM killer ended it: the sandbox reached its
    memory limit), ``duration_s`` and the ``report``."""

    exit_code: int
    stdout: str
    stderr: str
    signal: Optional[str]
    timed_out: bool
    truncated: bool
    duration_s: float
    report: Report
    #: A detached command's pid inside the sandbox (:meth:`Sandbox.exec_detached`).
    pid: int = 0
    #: The kernel's OOM killer ended the command (exit code 137, SIGKILL).
    oom_killed: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_code == 0

    @classmethod
    def from_json(cls, value: Any) -> ExecResult:
        """Decode the executor's ``ExecResult`` object; the report's status
        follows from how the command ended."""
        d = _obj(value, "exec result")
        if d.get("timed_out") is True:
            status = "timeout"
        elif d.get("oom_killed") is True:
            status = "oom"
        elif d.get("signal"):
            status = "signaled"
        elif d.get("exit_code"):
            status = "nonzero_exit"
        else:
            status = "ok"
        return decode(cls, {**d, "report": {**d, "status": status, "wall_time_s": d.get("duration_s")}})


@dataclass(frozen=True)
class OutputChunk:
    """A piece of a streamed command's output: ``stream`` is "stdout" or
    "stderr", ``data`` the text as it was produced."""

    stream: str
    data: str

    def __str__(self) -> str:
        return self.data


@dataclass(frozen=True)
class SessionInfo(_Decoded):
    """A shell session of a sandbox: its id, shell, working directory, whether
    a command runs in it, and the shell's pid inside the sandbox."""

    id: str = json_names("id", required=True)
    shell: str = ""
    cwd: str = ""
    running: bool = False
    pid: Optional[int] = None


@dataclass(frozen=True)
class SessionResult(_Decoded):
    """What a session command did (OpenHands semantics).

    ``status`` is ``completed`` (``exit_code`` and ``cwd`` set), ``running``
    (a timeout passed; ``reason`` is "timeout" or "no_output"; the command
    keeps running: call :meth:`Session.read` for more output, or
    :meth:`Session.interrupt`), ``busy`` (another command runs; this one was
    not run) or ``exited`` (the shell itself ended; the next command starts a
    fresh shell). ``output`` is what the terminal showed since the previous
    reply; ``notice`` explains anything unusual."""

    status: str
    exit_code: Optional[int]
    output: str
    cwd: Optional[str]
    reason: Optional[str]
    truncated: bool
    notice: Optional[str]

    @property
    def completed(self) -> bool:
        """True when the command finished."""
        return self.status == "completed"

    @property
    def running(self) -> bool:
        """True when the command still runs after this reply."""
        return self.status == "running"


@dataclass(frozen=True)
class FileEntry(_Decoded):
    """One entry of a directory listing: ``type`` is "file", "dir", "symlink"
    or "other"; ``mode`` the octal permission string ("0755")."""

    name: str
    type: str
    size: int
    mode: str
    mtime: Optional[datetime]


@dataclass(frozen=True)
class Listing(_Decoded):
    """A directory listing, directories first; ``truncated`` when the
    executor cut a very long one. Iterating yields the entries."""

    path: str
    entries: list[FileEntry]
    truncated: bool

    def __iter__(self) -> Iterator[FileEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class ArchiveResult(_Decoded):
    """What an upload unpacked: the directory, the number of entries and of
    bytes."""

    path: str
    entries: int
    bytes: int


@dataclass(frozen=True)
class CmdStart(_Decoded):
    """How a create's ``cmd`` (the sandbox's main command) started:
    ``status`` "running", or "exited" with ``exit_code`` when it ended at
    once. The server's /logs, /wait and /signal routes of the sandbox
    follow it."""

    status: str
    exit_code: Optional[int]


@dataclass(frozen=True)
class SandboxRecord(_Decoded):
    """A sandbox as the server records it (what ``sbx inspect`` prints).

    ``status`` is creating, running, paused, stopped or removing;
    ``checkpoint`` names the snapshot a stopped sandbox resumes from, and
    ``idle`` says its idle timeout stopped it (the next call restores it).
    ``spec``,
    ``image`` and ``network`` are the server's objects as sent; ``raw`` is
    the whole record. ``cmd_exit`` is how the main command (``cmd``) ended,
    once the server saw it end (the sandbox runs on after it). ``state`` is
    the state in docker's words: "exited" for a stopped sandbox and for one
    whose main command ended, "restarting" while its restart policy waits
    to run it again (``cmd_restarting`` is how its latest run ended), else
    the status; ``restart_count`` counts the restarts since it started."""

    id: str = json_names("id", required=True)
    name: Optional[str] = None
    status: str = ""
    created: Optional[datetime] = None
    started: Optional[datetime] = None
    stopped: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    exit_code: Optional[int] = None
    pid: Optional[int] = None
    pids: list[int] = field(default_factory=list)
    spec: dict[str, Any] = field(default_factory=dict)
    image: dict[str, Any] = field(default_factory=dict)
    network: dict[str, Any] = field(default_factory=dict)
    cmd_start: Optional[CmdStart] = None
    cmd_exit: Optional[Exit] = None
    state: str = ""
    restart_count: int = 0
    cmd_restarting: Optional[Exit] = None
    checkpoint: str = ""
    idle: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def labels(self) -> dict[str, str]:
        """The sandbox's labels."""
        labels = self.spec.get("labels")
        return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}

    @property
    def from_pool(self) -> str:
        """The warm pool whose idle member this sandbox is ("" if none)."""
        value = self.raw.get("from_pool")
        return value if isinstance(value, str) else ""

    @property
    def pool(self) -> str:
        """Whether a warm pool served the create (``create_timings.pool``):
        ``"hit, NAME"``, or ``"miss, REASON"`` saying why none could (no pool
        for the image, a field of a pool's key that differs, no ready
        member); "" when the server does not say."""
        timings = self.raw.get("create_timings")
        value = timings.get("pool") if isinstance(timings, Mapping) else None
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Stats(_Decoded):
    """A sandbox's resource use from its cgroups: CPU times in seconds,
    memory in bytes (limit 0: none), OOM kills, processes."""

    cpu_time_s: float
    user_time_s: float
    sys_time_s: float
    cpu_throttled_s: float
    memory_current_bytes: int
    memory_peak_bytes: int
    memory_limit_bytes: int
    oom_kills: int
    pids: int
    pids_peak: int
    pids_limit: int

    @classmethod
    def from_json(cls, value: Any) -> Stats:
        """Decode the server's ``Stats`` object (times in seconds, ``*_s``;
        servers before the unified wire format sent nanoseconds)."""
        d = dict(_obj(value, "stats"))
        for key in ("cpu_time", "user_time", "sys_time", "cpu_throttled"):
            if d.get(key + "_s") is None and isinstance(d.get(key), int):
                d[key + "_s"] = d[key] / 1e9
        return decode(cls, d)


@dataclass(frozen=True)
class Image(_Decoded):
    """A cached image: its name, digest, creation time, platform and size in
    bytes."""

    name: str
    digest: str
    created: Optional[datetime]
    platform: str
    size_bytes: int = json_names("size_bytes", "size")

    @property
    def familiar_name(self) -> str:
        """The name as docker prints it: ``busybox:latest`` for
        ``index.docker.io/library/busybox:latest`` (``name`` is the
        canonical form the server records)."""
        return familiar_name(self.name)


@dataclass(frozen=True)
class ImageDetail(_Decoded):
    """An image in full: the :class:`Image` fields plus its ``config``
    (entrypoint, cmd, env, working dir, user, labels, stop signal), the
    unpacked layer directories on the server and the layers' diff ids."""

    name: str
    digest: str
    created: Optional[datetime]
    platform: str
    size_bytes: int = json_names("size_bytes", "size")
    config: dict[str, Any] = json_names("config")
    layer_dirs: list[str] = json_names("layer_dirs", "layerDirs")
    diff_ids: list[str] = json_names("diff_ids", "diffIDs")

    @property
    def familiar_name(self) -> str:
        """The name as docker prints it (see :attr:`Image.familiar_name`)."""
        return familiar_name(self.name)


#: The registry of image names that give none.
DEFAULT_REGISTRY = "index.docker.io"


def familiar_name(name: str) -> str:
    """Shorten a canonical image name the way docker prints it:
    ``index.docker.io/library/busybox:latest`` becomes ``busybox:latest``,
    ``index.docker.io/me/app:1`` becomes ``me/app:1``; other registries'
    names stay as they are."""
    for prefix in (DEFAULT_REGISTRY + "/library/", DEFAULT_REGISTRY + "/"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


@dataclass(frozen=True)
class ImageHistoryStep(_Decoded):
    """One step of how an image was built (:meth:`Images.history`, newest
    first): when, the command that made it, a comment, whether it made no
    layer, and the layer it made (its diff id and unpacked size; "" and 0
    for none)."""

    created: Optional[datetime]
    created_by: str
    comment: str
    empty_layer: bool
    diff_id: str
    size_bytes: int


@dataclass(frozen=True)
class Change(_Decoded):
    """A path of a sandbox's root that differs from its image
    (:meth:`Sandbox.diff`): ``kind`` is "A" (added), "C" (changed) or "D"
    (deleted)."""

    kind: str
    path: str


@dataclass(frozen=True)
class ProcessInfo(_Decoded):
    """A process of a running sandbox (:meth:`Sandbox.top`): its PID inside
    the sandbox and on the host, its parent inside (0: outside), real UID,
    state, CPU time, resident memory and command line."""

    pid: int
    host_pid: int
    ppid: int
    uid: int
    state: str
    cpu_time_s: float
    rss_bytes: int
    command: str


@dataclass(frozen=True)
class DiskUsage(_Decoded):
    """What the server holds (:meth:`Client.disk_usage`): images (and those
    a sandbox uses), their layers' bytes each counted once (and the part
    no sandbox uses), sandboxes (and running ones), and what their
    writable layers hold in memory (and the part of stopped ones)."""

    images: int
    images_in_use: int
    layers_bytes: int
    reclaimable_bytes: int
    sandboxes: int
    sandboxes_running: int
    writable_bytes: int
    stopped_writable_bytes: int


@dataclass(frozen=True)
class LogFrame(_Decoded):
    """A piece of a main command's output (:meth:`Sandbox.follow_logs`):
    ``type`` "stdout" or "stderr" with ``data``, or "gap" when ``lost``
    bytes from ``offset`` on are no longer held. ``offset`` is absolute:
    resume with ``since=``."""

    type: str
    offset: int
    data: str
    time: Optional[datetime]
    lost: int


@dataclass(frozen=True)
class LogOutput:
    """What :meth:`Sandbox.logs` read: the main command's ``stdout`` and
    ``stderr`` still held, the bytes ``lost`` before them, and ``end``, the
    offset to resume from with ``since=``."""

    stdout: str
    stderr: str
    lost: int
    end: int


@dataclass(frozen=True)
class Exit(_Decoded):
    """How a sandbox's main command ended (:meth:`Sandbox.wait`): its exit
    code (128+n for signal n), the signal's name or "", whether the
    sandbox's cgroup OOM-killed it, why it could not start, and when it
    started and finished."""

    exit_code: int
    signal: str
    oom_killed: bool
    error: str
    started_at: Optional[datetime]
    finished_at: Optional[datetime]


@dataclass(frozen=True)
class ImageGCReport(_Decoded):
    """What an image garbage collection removed: layer keys, the bytes freed,
    and unreferenced layers kept because a mount still uses them."""

    removed_layers: list[str] = json_names("removed_layers", "removedLayers")
    freed_bytes: int = json_names("freed_bytes", "freedBytes")
    kept_in_use: list[str] = json_names("kept_in_use", "keptInUse")


@dataclass(frozen=True)
class PruneReport(_Decoded):
    """What :meth:`Client.prune` removed: sandbox ids, image names, and the
    layer collection that followed."""

    sandboxes: list[str]
    images: list[str]
    layers: ImageGCReport


@dataclass(frozen=True)
class PreparedImage(_Decoded):
    """The result of :meth:`Images.prepare`: the image (named
    ``sbx-prepared:<hash>``), whether it was already built, and the end of
    the setup script's output."""

    image: Image
    cached: bool
    output: str


@dataclass(frozen=True)
class BuildResult(_Decoded):
    """The result of :meth:`Images.build`: the image built (named by
    ``tag``, else only by its digest), the steps of the stages built and
    how many of them were reused from the server's step cache."""

    image: Image
    steps: int
    cached: int


@dataclass(frozen=True)
class BuildPruneReport(_Decoded):
    """What :meth:`Images.prune_build_cache` removed: the step images, the
    cache mounts and the bytes they held, and the layer collection that
    followed."""

    images: int
    cache_mounts: int
    cache_mount_bytes: int
    layers: ImageGCReport


@dataclass(frozen=True)
class PullProgress(_Decoded):
    """One layer's state during a pull: its digest, index, phase and bytes
    done out of ``total``."""

    layer: str
    index: int
    phase: str
    current: int
    total: int


@dataclass(frozen=True)
class EgressAudit(_Decoded):
    """One decision of the egress daemon (the ``egress`` of a
    "sandbox.egress" event): ``kind`` "dns", "connection" or "request";
    ``name`` the host (SNI, Host or query), ``addr`` the address the
    sandbox dialled, ``rule`` the policy entry that decided; ``decision``
    "allow", "deny" or "audit", and ``reason`` why a deny; ``method`` and
    ``path`` of a request; the bytes each way. Never a secret's value."""

    kind: str
    decision: str
    name: str = ""
    addr: str = ""
    rule: str = ""
    reason: str = ""
    method: str = ""
    path: str = ""
    bytes_up: int = 0
    bytes_down: int = 0


@dataclass(frozen=True)
class Event(_Decoded):
    """An event of the server's stream.

    ``seq`` grows by one per event (a gap means a lost event); ``type`` is
    e.g. "sandbox.created", "sandbox.exited", "image.pulled",
    "sandbox.egress" (``egress`` then holds the decision), or "reset"
    (events may have been lost: re-read the state)."""

    seq: int
    type: str
    time: Optional[datetime]
    sandbox: Optional[str]
    name: Optional[str]
    status: Optional[str]
    exit_code: Optional[int]
    oom_kills: int
    image: Optional[str]
    raw: dict[str, Any] = field(repr=False)
    egress: Optional[EgressAudit] = None


@dataclass(frozen=True)
class Health(_Decoded):
    """The server's liveness answer: "ok" and its version."""

    status: str
    version: str


@dataclass(frozen=True)
class HostInfo(_Decoded):
    """Facts of the server's host, as ``sbx info`` reports them."""

    version: str
    kernel: str
    cgroup_mode: str
    cgroup_controllers: list[str]
    seccomp: bool
    overlayfs: bool
    root: str
    run_root: str
    warnings: list[str]
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class GCReport(_Decoded):
    """What the server's garbage collection removed: expired sandboxes,
    interrupted creates and removes, stopped sandboxes cleaned up,
    orphaned runtime state, idle pool members whose pool or PID 1 is gone,
    and ``auto_remove`` sandboxes whose command had ended."""

    expired: list[str]
    interrupted: list[str]
    stopped: list[str]
    orphans: list[str]
    pooled: list[str] = field(default_factory=list)
    auto_removed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Pool(_Decoded):
    """A warm pool (:attr:`Client.pools`): its ``name``, the ``size`` of idle
    members it keeps, the ``options`` they start with (the server's object
    as sent), the ``key`` a create must match to claim one, the ids of the
    ``ready`` members, how many are ``starting``, and when it was
    ``created``."""

    name: str = json_names("name", required=True)
    size: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    key: str = ""
    ready: list[str] = field(default_factory=list)
    starting: int = 0
    created: Optional[datetime] = None


@dataclass(frozen=True)
class Snapshot(_Decoded):
    """A checkpoint of a sandbox on the server (:meth:`Sandbox.checkpoint`,
    :attr:`Client.snapshots`): its ``name``, when it was ``created``, the
    sandbox it holds (``source_id``, ``source_name``, the ``hostname``
    restores keep, its options as ``spec`` and its ``image``, the server's
    objects as sent), its size on disk in ``bytes``, the sha256 of each of
    its ``files``, the CRIU that made it (``criu_version``), its ``format``
    version and the seconds the dump and the layer's copy took (``dump_s``,
    ``layer_s``). :meth:`Sandboxes.restore` starts a new sandbox from it."""

    name: str = json_names("name", required=True)
    created: Optional[datetime] = None
    source_id: str = ""
    source_name: str = ""
    bytes: int = 0
    criu_version: str = ""
    format: int = 0
    hostname: str = ""
    spec: dict[str, Any] = field(default_factory=dict)
    image: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    dump_s: float = 0.0
    layer_s: float = 0.0


@dataclass(frozen=True)
class PoolReport(_Decoded):
    """What a pool operation did: the members it ``started`` (fill) and
    ``removed`` (drain, remove, members that no longer matched)."""

    removed: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ExecutorInfo(_Decoded):
    """CPU, memory, disk and pids as seen inside a sandbox
    (:meth:`Sandbox.info`), each the server's object as sent: ``cpu``
    (count, load1, usage_s, limit_cpus), ``memory`` (total_bytes,
    available_bytes, used_bytes, limit_bytes), ``disk`` (path,
    total_bytes, used_bytes, free_bytes), ``pids`` (current, limit).
    The sandbox's own code can change these answers: do not base
    decisions of the host on them."""

    cpu: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    disk: dict[str, Any] = field(default_factory=dict)
    pids: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
