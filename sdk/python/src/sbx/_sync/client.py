# Generated from src/sbx/_async/client.py by scripts/gen_sync.py: do not edit.
"""The client of one sbx server: sandboxes, images, events and the host.

This sync twin is generated from ../_async/ by
sdk/python/scripts/gen_sync.py.
"""

from __future__ import annotations

import builtins
import os
import time
from contextlib import ExitStack
from types import TracebackType
from typing import IO, Any, Iterator, Callable, Mapping, Optional, Sequence, Union

from httpx_sse import EventSource, ServerSentEvent

from .. import _sio, _tar
from .._errors import ConnectError, ProtocolError
from .._models import (
    BuildPruneReport,
    BuildResult,
    DiskUsage,
    Event,
    GCReport,
    Health,
    HostInfo,
    Image,
    ImageDetail,
    ImageGCReport,
    ImageHistoryStep,
    Pool,
    PoolReport,
    PreparedImage,
    PruneReport,
    PullProgress,
    SandboxRecord,
    Snapshot,
    Tmpfs,
    Volume,
    NamedVolume,
    VolumeInfo,
    VolumePruneReport,
)
from .._lease import DEFAULT_LEASE
from .._transport import DEFAULT, _Default, translated
from .._units import Duration, Size, go_duration, lease_seconds
from .._wire import (
    Command,
    Env,
    Network,
    Pull,
    UserNS,
    build_body,
    build_params,
    create_body,
    decode_json,
    env_list,
    frame_error,
    image_path,
    pool_path,
    sandbox_path,
    snapshot_path,
    token_from_env,
    volume_path,
)
from ._http import Closing, HTTP, download_to, ndjson
from .sandbox import Sandbox

#: Seconds a call waits for the server's answer unless the call says otherwise.
DEFAULT_TIMEOUT_S = 60.0


class Client(Closing):
    """A client of ``sbx serve``.

    ``host`` is ``unix:///path`` (default ``$SBX_HOST``, else
    ``unix:///run/sbx/sbx.sock``), ``http://host:port``,
    ``https://host:port`` or ``host:port``. ``token`` is the server's
    bearer token (default ``$SBX_TOKEN`` or the file ``$SBX_TOKEN_FILE``).
    ``timeout`` bounds quick calls in seconds (None: no bound); calls that
    take as long as their work (create, pull, import, exec, sessions, file
    transfers) have their own deadlines. ``verify`` is passed to the TLS
    layer (a CA bundle path, or False).

    ``lease`` (default "5m"; seconds, a timedelta or a Go duration string,
    at least 1 s) is the owner lease of the sandboxes this client creates
    without a ``lease`` of their own: a thread of the client renews it every
    third of the lease until the sandbox is removed or the client closed,
    so the sandboxes of a program that crashes or exits without removing
    them are removed by the server a lease later. ``lease=None`` creates
    sandboxes without one (they run until removed or their ``ttl``).

    Use it as a context manager, or call ``close`` when done: closing stops
    the renewals, and the sandboxes it leased are removed a lease later."""

    def __init__(
        self,
        host: Optional[str] = None,
        *,
        token: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT_S,
        verify: Union[bool, str] = True,
        lease: Optional[Duration] = DEFAULT_LEASE,
    ) -> None:
        lease_s = None if lease is None else lease_seconds(lease)
        self._http = HTTP(host, token if token is not None else token_from_env(), timeout, verify, lease_s)
        self.sandboxes = Sandboxes(self._http)
        self.images = Images(self._http)
        self.pools = Pools(self._http)
        self.snapshots = Snapshots(self._http)
        self.volumes = Volumes(self._http)

    def __repr__(self) -> str:
        return f"<Client {self._http.where}>"

    def health(self) -> Health:
        """The server's liveness answer (needs no token)."""
        return Health.from_json(self._http.call("GET", "/healthz", what="health"))

    def info(self) -> HostInfo:
        """Facts of the server's host: kernel, cgroups, seccomp, overlayfs,
        state directories, warnings."""
        return HostInfo.from_json(self._http.call("GET", "/v1/info", what="info"))

    def gc(self) -> GCReport:
        """Remove what crashes left behind on the server (expired sandboxes,
        interrupted creates and removes, orphaned runtime state)."""
        return GCReport.from_json(self._http.call("POST", "/v1/gc", what="gc", timeout=None))

    def disk_usage(self) -> DiskUsage:
        """What the server's images, layers and sandboxes hold, as ``docker
        system df`` shows it."""
        return DiskUsage.from_json(self._http.call("GET", "/v1/system/df", what="disk usage", timeout=None))

    def prune(self, *, all: bool = False) -> PruneReport:
        """Remove the exited sandboxes (stopped, or whose main command
        ended), then with ``all`` every image no sandbox uses, then the layers no image uses (``docker system
        prune``)."""
        reply = self._http.call("POST", "/v1/system/prune", what="prune", json={"all": all}, timeout=None)
        return PruneReport.from_json(reply)

    def events(
        self,
        *,
        since: Optional[int] = None,
        timeout: Optional[float] = None,
        reconnect_for: float = 10.0,
    ) -> EventStream:
        """The server's events, in order, as an iterable stream of Event.

        Without ``since`` the stream starts with the next event; with it,
        the buffered events after that sequence number come first (a
        ``reset`` event says some were lost). A stream the server ends (a
        slow reader, a restart) is resumed from the last event received,
        retrying for up to ``reconnect_for`` seconds before ConnectError.
        ``timeout`` is the longest wait for the next event or the server's
        keep-alive (sent every 15 s) before RequestTimeoutError; None waits
        for ever. Close the stream (or leave its ``with`` block) to stop."""
        return EventStream(self._http, since, timeout, reconnect_for)

    def close(self) -> None:
        """Close the client's connections."""
        self._http.close()




class Sandboxes:
    """The sandboxes of the server (``client.sandboxes``)."""

    def __init__(self, http: HTTP) -> None:
        self._http = http

    def create(
        self,
        image: Optional[str] = None,
        *,
        rootfs: Optional[str] = None,
        name: Optional[str] = None,
        cmd: Optional[Union[Sequence[str], str]] = None,
        auto_remove: bool = False,
        restart: Optional[str] = None,
        disk_backing: Optional[str] = None,
        env: Optional[Env] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
        hostname: Optional[str] = None,
        memory: Optional[Size] = None,
        cpus: Optional[float] = None,
        pids: Optional[int] = None,
        disk: Optional[Size] = None,
        network: Optional[Network] = None,
        userns: Optional[UserNS] = None,
        publish: Optional[Sequence[str]] = None,
        egress: Optional[str] = None,
        egress_policy: Optional[str] = None,
        secrets: Optional[Sequence[Mapping[str, Any]]] = None,
        allow_host_ports: Optional[Sequence[str]] = None,
        dns: Optional[Sequence[str]] = None,
        volumes: Optional[Sequence[Union[Volume, NamedVolume, str]]] = None,
        tmpfs: Optional[Sequence[Union[Tmpfs, str]]] = None,
        labels: Optional[Mapping[str, str]] = None,
        ttl: Optional[Duration] = None,
        idle_timeout: Optional[Duration] = None,
        lease: Union[Duration, None, _Default] = DEFAULT,
        readonly_rootfs: bool = False,
        cap_add: Optional[Sequence[str]] = None,
        cap_drop: Optional[Sequence[str]] = None,
        seccomp: Optional[str] = None,
        pull: Optional[Pull] = None,
        publish_all: bool = False,
        extra_hosts: Optional[Sequence[str]] = None,
        ulimits: Optional[Sequence[Union[str, Mapping[str, Any]]]] = None,
        shm_size: Optional[Size] = None,
    ) -> Sandbox:
        """Create a sandbox and return it once its executor answers.

        ``image`` is a reference in the server's cache (pulled there when
        missing), or give ``rootfs``, a directory on the server that it
        allows. Limits: ``memory`` and ``disk`` (bytes or "512m"), ``cpus``
        (e.g. 1.5), ``pids``. The writable layer is a tmpfs of ``disk``
        bytes whose pages count toward ``memory``; ``disk_backing="disk"``
        puts it on the server's disk instead (not capped by ``disk``). ``network`` is "none" (default), "bridge" or
        "host"; ``publish`` ("8080:80", "127.0.0.1:8080:80/udp"), ``egress``,
        ``dns`` and ``allow_host_ports`` apply to bridge mode, and so do
        ``egress_policy`` (the text of an egress policy file, instead of
        ``egress``) and ``secrets`` (``[{"name": "API_KEY", "hosts":
        ["api.example.com"], "prefix": "sk-", "value": ...}]``: the sandbox's
        ``API_KEY`` holds a placeholder the egress proxy swaps for the value
        on requests to those hosts; see docs/network.md). ``userns`` is
        "private" (the server's default: root in the sandbox is an
        unprivileged host id range) or "host" (the host's ids, as
        :meth:`AsyncSandbox.checkpoint`, fork, ``stop(checkpoint=True)`` and
        ``idle_timeout`` need). ``ttl``
        (seconds, a timedelta or "1h") removes the sandbox that long after
        its creation; ``idle_timeout`` (the same forms) checkpoints it to disk
        on the server once nobody has used it that long (no exec, session,
        file or port call), freeing its memory, and the next such call
        restores it first (``record.idle`` says it sleeps; the server needs
        CRIU). ``lease`` (the same forms, at least 1 s; default: the
        client's, 5 minutes) is an owner lease: the server removes the
        sandbox once that long passed without a renewal, which this client
        makes every third of the lease until the sandbox is removed or the
        client closed (:meth:`AsyncSandbox.renew` renews it too), so a
        crashed program leaves nothing running; ``lease=None`` gives it
        none. ``volumes`` are Volume objects or "HOST:PATH[:ro]" (a directory
        of the server's host), or NamedVolume objects or "NAME:PATH[:ro]" (a
        named volume, :attr:`volumes`, made when missing),
        ``tmpfs`` Tmpfs objects or "PATH[:SIZE]". ``cmd`` is the sandbox's
        main command, exec'd once the sandbox is ready (``record.cmd_start``
        says whether it runs or already exited); with ``auto_remove`` the
        server removes the sandbox once that command has ended or the
        sandbox was stopped (``docker run --rm``); ``restart`` is docker's
        restart policy for it ("no", "on-failure", "on-failure:3", "always",
        "unless-stopped": the sandbox's executor runs it again after a
        back-off, ``record.restart_count`` counts; a stop ends it); a string ``cmd`` runs
        with ``/bin/sh -c``, a list is exec'd as it is. ``env`` is a mapping
        or "KEY=VALUE" strings. ``pull`` says when the server pulls
        ``image``: "missing" (the default), "always" or "never" (an offline
        program: an image not in the server's cache fails at once).
        As docker run's flags: ``publish_all`` (-P: every port the image
        exposes on a free host port, bridge mode; a ``publish`` entry of
        just "80" picks a free host port too), ``extra_hosts``
        (["db:10.0.0.5"], --add-host), ``ulimits`` (["nofile=1024:2048"]
        or mappings of name, soft and hard; -1 unlimited) and ``shm_size``
        (bytes or "256m": the size of /dev/shm).

        Bad values raise ValueError or TypeError before anything is sent;
        the server's refusals are InvalidError, ForbiddenError (its policy),
        ConflictError (name in use) and LimitError (full). Used as a context
        manager, the sandbox is removed at the end of the block."""
        options = dict(locals())
        if lease is DEFAULT:
            options["lease"] = self._http.lease
        body = create_body(options)
        reply = self._http.call("POST", "/v1/sandboxes", what="create", json=body, timeout=None)
        sb = Sandbox(self._http, SandboxRecord.from_json(reply))
        if "lease" in body:
            self._http.leases.keep(sb.id, lease_seconds(body["lease"]))
        return sb

    def restore(self, snapshot: str, *, name: Optional[str] = None) -> Sandbox:
        """Start a new sandbox from a snapshot (:meth:`Sandbox.checkpoint`):
        a new id, its own writable layer, network and cgroups, the
        snapshot's processes. A snapshot changed on disk is refused
        (InvalidError)."""
        body = {} if name is None else {"name": name}
        path = snapshot_path(snapshot, "/restore")
        reply = self._http.call("POST", path, what=f"restore {snapshot}", json=body, timeout=None)
        return Sandbox(self._http, SandboxRecord.from_json(reply))

    def get(self, sandbox_id: str) -> Sandbox:
        """The sandbox with this id, unique id prefix or name
        (NotFoundError when there is none)."""
        reply = self._http.call("GET", sandbox_path(sandbox_id), what=f"inspect {sandbox_id}")
        return Sandbox(self._http, SandboxRecord.from_json(reply))

    def list(
        self,
        *,
        labels: Optional[Mapping[str, str]] = None,
        status: Optional[str] = None,
        running: Optional[bool] = None,
    ) -> list[Sandbox]:
        """The sandboxes, oldest first: all, or those with every label in
        ``labels``, in ``status`` (a status, or the state "exited" or
        "restarting": ``record.state``), or (``running=True``) running,
        paused or creating and not exited (as ``docker ps``)."""
        params: list[tuple[str, str]] = [("label", f"{k}={v}") for k, v in (labels or {}).items()]
        if status is not None:
            params.append(("status", status))
        if running is not None:
            params.append(("running", "true" if running else "false"))
        reply = self._http.call("GET", "/v1/sandboxes", what="list sandboxes", params=params)
        items = reply.get("sandboxes") if isinstance(reply, dict) else None
        if not isinstance(items, list):
            raise ProtocolError("list sandboxes: the server sent no list")
        return [Sandbox(self._http, SandboxRecord.from_json(s)) for s in items]


class Images:
    """The server's image cache (``client.images``)."""

    def __init__(self, http: HTTP) -> None:
        self._http = http

    def list(self) -> list[Image]:
        """The cached images."""
        reply = self._http.call("GET", "/v1/images", what="list images")
        items = reply.get("images") if isinstance(reply, dict) else None
        if not isinstance(items, list):
            raise ProtocolError("list images: the server sent no list")
        return [Image.from_json(i) for i in items]

    def get(self, ref: str) -> ImageDetail:
        """An image in full: config, layers, digest (NotFoundError when it is
        not cached)."""
        return ImageDetail.from_json(self._http.call("GET", image_path(ref), what=f"inspect image {ref}"))

    def pull(self, ref: str, *, on_progress: Optional[Callable[[PullProgress], Any]] = None) -> Image:
        """Pull ``ref`` into the server's cache and return it; ``on_progress``
        is called with each layer's PullProgress as the pull goes."""
        if on_progress is None:
            reply = self._http.call("POST", "/v1/images/pull", what=f"pull {ref}", json={"ref": ref}, timeout=None)
            return Image.from_json(reply)
        with self._http.stream(
            "POST", "/v1/images/pull", what=f"pull {ref}", params={"progress": "1"}, json={"ref": ref}, timeout=None
        ) as resp:
            for frame in ndjson(resp, f"pull {ref}"):
                kind = frame.get("type")
                if kind == "progress":
                    on_progress(PullProgress.from_json(frame.get("progress")))
                elif kind == "result":
                    return Image.from_json(frame.get("image"))
                elif kind == "error":
                    raise frame_error(frame)
        raise ProtocolError(f"pull {ref}: the stream ended without a result")

    def build(
        self,
        context_dir: Union[str, os.PathLike[str]],
        *,
        tag: Optional[str] = None,
        dockerfile: Optional[str] = None,
        build_args: Optional[Mapping[str, str]] = None,
        target: Optional[str] = None,
        no_cache: bool = False,
        network: Optional[str] = None,
        pull: Optional[Pull] = None,
        secrets: Optional[Mapping[str, Union[str, bytes]]] = None,
        on_output: Optional[Callable[[str], Any]] = None,
    ) -> BuildResult:
        """Build an image on the server from a Dockerfile, as ``sbx build``
        does (docs/images.md), and name it ``tag`` (NAME[:TAG]).

        The local directory ``context_dir`` is sent as a tar stream minus
        what its ``.dockerignore`` (or ``<dockerfile>.dockerignore``)
        excludes, as ``docker build`` sends it; symbolic links go as links,
        sockets, FIFOs and devices are left out. ``dockerfile`` is the
        Dockerfile's path inside the context (default "Dockerfile");
        ``build_args`` give ``ARG`` values; ``target`` builds that stage and
        those it needs; ``no_cache`` builds every step again; ``network``
        is the network of ``RUN`` steps ("none", the default, or
        "bridge"); ``pull`` the pull policy of ``FROM`` images.
        ``secrets`` (id -> str or bytes, each at most 1 MiB) are what
        ``RUN --mount=type=secret,id=ID`` reads, as ``sbx build --secret``
        gives them: sent in the request's body, they reach only the steps
        that mount them (no layer, history line, cache key or server log).
        ``on_output`` is called with the build's output text as it arrives.

        A Dockerfile that does not parse or a failing step raises the
        server's error (InvalidError for a bad Dockerfile, naming its
        line); a context over the server's upload limit TooLargeError."""
        params, dockerfile_path = build_params(locals())
        content_type, content = build_body(secrets, _tar.context_chunks(context_dir, dockerfile_path))
        what = f"build {os.fspath(context_dir)}"
        with self._http.stream(
            "POST",
            "/v1/images/build",
            what=what,
            params=params,
            content=_sio.iterate(content),
            headers={"Content-Type": content_type},
            timeout=None,
        ) as resp:
            for frame in ndjson(resp, what):
                kind = frame.get("type")
                if kind == "output":
                    text = frame.get("output")
                    if on_output is not None and isinstance(text, str):
                        on_output(text)
                elif kind == "result":
                    return BuildResult.from_json(frame.get("build"))
                elif kind == "error":
                    raise frame_error(frame)
        raise ProtocolError(f"{what}: the stream ended without a result")

    def remove(self, ref: str) -> None:
        """Remove the image's name from the cache (its layers stay until
        :meth:`gc`)."""
        self._http.call("DELETE", image_path(ref), what=f"remove image {ref}")

    def import_archive(
        self, source: Union[str, os.PathLike[str], bytes, IO[bytes]], *, name: Optional[str] = None
    ) -> Image:
        """Import an image into the server's cache from ``source``: a local
        archive file (OCI archive, docker save tar, root filesystem tarball;
        gzip or zstd too), a local directory (sent as a tar: a root
        filesystem, or an OCI layout), the archive's bytes, or a binary file
        object. ``name`` is needed when the archive does not name its image,
        and always for a root filesystem."""
        reply = _upload_tar(self._http, "/v1/images/import", "import image", source, name, directories=True)
        return Image.from_json(reply)

    def tag(self, source: str, target: str) -> Image:
        """Give the cached image ``source`` the further name ``target``
        (NAME[:TAG]), as ``docker tag`` does; the layers are shared, and an
        image named ``target`` before loses that name."""
        reply = self._http.call(
            "POST", "/v1/images/tag", what=f"tag {source}", json={"source": source, "target": target}
        )
        return Image.from_json(reply)

    def history(self, ref: str) -> builtins.list[ImageHistoryStep]:
        """How the image was built, newest step first, as ``docker history``
        shows it."""
        reply = self._http.call("GET", "/v1/images/history", what=f"history of {ref}", params={"ref": ref})
        items = reply.get("history") if isinstance(reply, dict) else None
        if not isinstance(items, list):
            raise ProtocolError(f"history of {ref}: the server sent no list")
        return [ImageHistoryStep.from_json(i) for i in items]

    def save(self, refs: Union[str, Sequence[str]], dest: Union[str, os.PathLike[str], IO[bytes]]) -> None:
        """Write the images ``refs`` as one OCI archive (``docker save``;
        :meth:`import_archive` reads it back) to ``dest``: a local path,
        which appears only once the archive is complete, or a binary file
        object."""
        names = [refs] if isinstance(refs, str) else list(refs)
        download_to(self._http, dest, "POST", "/v1/images/save", what=f"save {', '.join(names)}", json={"refs": names})

    def gc(self) -> ImageGCReport:
        """Remove the layers no cached image and no sandbox on record uses."""
        return ImageGCReport.from_json(self._http.call("POST", "/v1/images/gc", what="image gc", timeout=None))

    def prune_build_cache(self) -> BuildPruneReport:
        """Remove the server's build cache, as ``sbx build prune`` does: the
        step images (``sbx-build:*``), the ``RUN --mount=type=cache``
        directories no running step holds, then the layers no image uses."""
        return BuildPruneReport.from_json(
            self._http.call("POST", "/v1/images/build/prune", what="build prune", timeout=None)
        )

    def prepare(
        self,
        base: str,
        script: str,
        *,
        env: Optional[Env] = None,
        user: Optional[str] = None,
        workdir: Optional[str] = None,
        network: Optional[Network] = None,
    ) -> PreparedImage:
        """Build (once) an image from ``base`` plus a setup ``script`` (run
        with /bin/sh -c), cached by their hash as ``sbx prepare`` does; a
        second call with the same inputs returns the cached image."""
        body: dict[str, Any] = {"base": base, "script": script}
        if env is not None:
            body["env"] = env_list(env)
        for key, value in (("user", user), ("workdir", workdir), ("network", network)):
            if value is not None:
                body[key] = value
        reply = self._http.call("POST", "/v1/images/prepare", what=f"prepare {base}", json=body, timeout=None)
        return PreparedImage.from_json(reply)


class Pools:
    """The server's warm pools (``client.pools``): sandboxes started ahead
    and kept idle. A :meth:`Sandboxes.create` whose options match a pool's
    key claims a member in about a millisecond instead of starting one."""

    def __init__(self, http: HTTP) -> None:
        self._http = http

    def create(
        self,
        name: str,
        size: int,
        image: Optional[str] = None,
        *,
        rootfs: Optional[str] = None,
        env: Optional[Env] = None,
        workdir: Optional[str] = None,
        user: Optional[str] = None,
        hostname: Optional[str] = None,
        memory: Optional[Size] = None,
        cpus: Optional[float] = None,
        pids: Optional[int] = None,
        disk: Optional[Size] = None,
        network: Optional[Network] = None,
        userns: Optional[UserNS] = None,
        egress: Optional[str] = None,
        allow_host_ports: Optional[Sequence[str]] = None,
        dns: Optional[Sequence[str]] = None,
        volumes: Optional[Sequence[Union[Volume, str]]] = None,
        tmpfs: Optional[Sequence[Union[Tmpfs, str]]] = None,
        readonly_rootfs: bool = False,
        cap_add: Optional[Sequence[str]] = None,
        cap_drop: Optional[Sequence[str]] = None,
        seccomp: Optional[str] = None,
        extra_hosts: Optional[Sequence[str]] = None,
        ulimits: Optional[Sequence[Union[str, Mapping[str, Any]]]] = None,
        shm_size: Optional[Size] = None,
        cmd: Optional[Command] = None,
        key_env: Optional[Sequence[str]] = None,
        ready_check: Optional[Mapping[str, Any]] = None,
    ) -> Pool:
        """Define the pool ``name`` (letters, digits, '.', '_', '-'), which
        keeps ``size`` idle members started with the options of
        :meth:`Sandboxes.create` given here (a sandbox's name, labels, ttl,
        published ports, volumes and tmpfs mounts belong to the create that
        claims it). With ``cmd``, every member boots that main command (a
        server, an agent) with the pool's env, workdir and user; ``key_env``
        names variables set to a key of the member's own, and
        ``ready_check`` (``{"port": 8080, "path": "/health", "body": ...,
        "timeout": "1m"}``) is the HTTP GET on the sandbox's loopback that
        must answer 2xx before the member is ready (docs/pools.md). The
        server starts members in its background; :meth:`fill` starts them
        now. A name in use raises ConflictError."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"size {size!r}: want a non-negative integer")
        spec: dict[str, Any] = {"name": name, "size": size}
        if key_env is not None:
            if isinstance(key_env, str):
                raise TypeError("key_env: want a list of variable names, not a string")
            spec["key_env"] = list(key_env)
        if ready_check is not None:
            check = dict(ready_check)
            if "timeout" in check:
                check["timeout"] = go_duration(check["timeout"], "ready_check timeout")
            spec["ready_check"] = check
        spec["options"] = create_body(
            {k: v for k, v in locals().items() if k not in ("self", "name", "size", "key_env", "ready_check", "spec")}
        )
        reply = self._http.call("POST", "/v1/pools", what=f"create pool {name}", json=spec)
        return Pool.from_json(reply)

    def list(self) -> builtins.list[Pool]:
        """Every pool, by name, with its ready members."""
        reply = self._http.call("GET", "/v1/pools", what="list pools")
        items = reply.get("pools") if isinstance(reply, dict) else None
        if not isinstance(items, builtins.list):
            raise ProtocolError("list pools: the server sent no list")
        return [Pool.from_json(p) for p in items]

    def get(self, name: str) -> Pool:
        """One pool with its ready members (NotFoundError when there is
        none)."""
        return Pool.from_json(self._http.call("GET", pool_path(name), what=f"pool {name}"))

    def fill(self, name: str) -> PoolReport:
        """Start members until the pool holds ``size`` ready ones, and
        remove those that no longer match its key (e.g. the image's tag
        moved). Waits until they are ready."""
        reply = self._http.call("POST", pool_path(name, "/fill"), what=f"fill pool {name}", timeout=None)
        return PoolReport.from_json(reply)

    def drain(self, name: str) -> PoolReport:
        """Remove the pool's idle members; the definition stays and the
        server fills it again."""
        reply = self._http.call("POST", pool_path(name, "/drain"), what=f"drain pool {name}", timeout=None)
        return PoolReport.from_json(reply)

    def remove(self, name: str) -> PoolReport:
        """Remove the pool's definition, then its idle members. Sandboxes
        claimed from it are not touched."""
        reply = self._http.call("DELETE", pool_path(name), what=f"remove pool {name}", timeout=None)
        return PoolReport.from_json(reply)


class Volumes:
    """The server's named volumes (``client.volumes``): directories it keeps
    under its state root across sandboxes until removed; a create mounts
    one with ``volumes=["NAME:/path"]``."""

    def __init__(self, http: HTTP) -> None:
        self._http = http

    def create(self, name: str, *, labels: Optional[Mapping[str, str]] = None) -> VolumeInfo:
        """Make the volume ``name``; one that exists is returned as it is."""
        body: dict[str, Any] = {"name": name}
        if labels:
            body["labels"] = dict(labels)
        return VolumeInfo.from_json(self._http.call("POST", "/v1/volumes", what=f"create volume {name}", json=body))

    def list(self) -> builtins.list[VolumeInfo]:
        """The volumes, by name, with the sandboxes that have each."""
        reply = self._http.call("GET", "/v1/volumes", what="list volumes")
        items = reply.get("volumes") if isinstance(reply, dict) else None
        if not isinstance(items, builtins.list):
            raise ProtocolError("list volumes: the server sent no list")
        return [VolumeInfo.from_json(v) for v in items]

    def get(self, name: str) -> VolumeInfo:
        """One volume (NotFoundError when there is none)."""
        return VolumeInfo.from_json(self._http.call("GET", volume_path(name), what=f"inspect volume {name}"))

    def remove(self, name: str) -> None:
        """Remove the volume and its files; ConflictError while a sandbox
        (running or stopped) has it."""
        self._http.call("DELETE", volume_path(name), what=f"remove volume {name}")

    def prune(self) -> VolumePruneReport:
        """Remove every volume no sandbox has."""
        return VolumePruneReport.from_json(self._http.call("POST", "/v1/volumes/prune", what="prune volumes"))


class Snapshots:
    """The server's snapshots (``client.snapshots``): checkpoints of
    sandboxes (:meth:`Sandbox.checkpoint`), which
    :meth:`Sandboxes.restore` starts again. A snapshot holds the memory of
    the sandbox it was taken from, with any secret that was in it."""

    def __init__(self, http: HTTP) -> None:
        self._http = http

    def list(self) -> builtins.list[Snapshot]:
        """The snapshots, oldest first."""
        reply = self._http.call("GET", "/v1/snapshots", what="list snapshots")
        items = reply.get("snapshots") if isinstance(reply, dict) else None
        if not isinstance(items, builtins.list):
            raise ProtocolError("list snapshots: the server sent no list")
        return [Snapshot.from_json(s) for s in items]

    def get(self, name: str) -> Snapshot:
        """One snapshot in full, its files checked on the server against the
        digests its record lists (NotFoundError when there is none,
        InvalidError when one was changed on disk)."""
        return Snapshot.from_json(self._http.call("GET", snapshot_path(name), what=f"inspect snapshot {name}"))

    def remove(self, name: str) -> None:
        """Remove the snapshot and its files from the server."""
        self._http.call("DELETE", snapshot_path(name), what=f"remove snapshot {name}")

    def export(self, name: str, dest: Union[str, os.PathLike[str], IO[bytes]]) -> None:
        """Write the snapshot as one tar to ``dest``, for
        :meth:`import_archive` on another server with the same image: a
        local path, made with mode 0600 (the tar holds the sandbox's memory)
        and present only once complete, or a binary file object."""
        download_to(self._http, dest, "GET", snapshot_path(name, "/export"), what=f"export snapshot {name}", mode=0o600)

    def import_archive(
        self, source: Union[str, os.PathLike[str], bytes, IO[bytes]], *, name: Optional[str] = None
    ) -> Snapshot:
        """Add a snapshot to the server from a tar written by :meth:`export`:
        a local file, its bytes, or a binary file object; named ``name``,
        else as it was. The server checks every file against the digests
        the snapshot's record lists and refuses a damaged or truncated tar
        (InvalidError), and one over its upload limit (TooLargeError); a
        name in use raises ConflictError."""
        reply = _upload_tar(self._http, "/v1/snapshots/import", "import snapshot", source, name, directories=False)
        return Snapshot.from_json(reply)


def _upload_tar(
    http: HTTP,
    path: str,
    what: str,
    source: Union[str, os.PathLike[str], bytes, IO[bytes]],
    name: Optional[str],
    *,
    directories: bool,
) -> Any:
    """POST ``source`` as a tar body to ``path`` (``?name=`` when given) and
    return the decoded reply: a local file (or, with ``directories``, a
    directory sent as a tar of its contents), bytes, or a binary file
    object, streamed in chunks."""
    content: Any
    if isinstance(source, (bytes, bytearray)):
        content = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        if directories and os.path.isdir(source):
            content = _sio.iterate(_tar.tar_chunks(source, arcname="."))
        else:
            content = _sio.iterate(_tar.file_chunks(os.fspath(source)))
    else:
        content = _sio.iterate(iter(lambda: source.read(_tar.CHUNK), b""))
    return http.call(
        "POST",
        path,
        what=what,
        params={"name": name} if name else None,
        content=content,
        headers={"Content-Type": "application/x-tar"},
        timeout=None,
    )


class EventStream(Closing):
    """The server's events; see :meth:`Client.events`.

    It connects when entered (``with``) or first iterated: events from then
    on (or after ``since``) are seen. Iterate it for Event objects; close
    it, or leave its ``with`` block, to stop."""

    def __init__(self, http: HTTP, since: Optional[int], timeout: Optional[float], reconnect_for: float) -> None:
        self._http = http
        self._timeout = timeout
        self._reconnect_for = reconnect_for
        #: The sequence number of the last event received, to resume from.
        self.last_seq: Optional[int] = since
        self._stack: Optional[ExitStack] = None
        self._sse: Optional[Iterator[ServerSentEvent]] = None
        self._connected_once = False
        self._closed = False

    def _connect(self) -> Iterator[ServerSentEvent]:
        failing_since: Optional[float] = None
        while self._sse is None:
            headers = {"Last-Event-ID": str(self.last_seq)} if self.last_seq is not None else None
            stack = ExitStack()
            try:
                resp = stack.enter_context(
                    self._http.stream("GET", "/v1/events", what="events", headers=headers, timeout=self._timeout)
                )
                self._stack, self._sse = stack, EventSource(resp).iter_sse()
                self._connected_once = True
            except ConnectError:
                stack.close()
                now = time.monotonic()
                failing_since = failing_since or now
                if not self._connected_once or now - failing_since >= self._reconnect_for:
                    raise
                _sio.sleep(min(1.0, 0.1 + (now - failing_since) / 2))
            except BaseException:
                with _sio.shielded():
                    stack.close()
                raise
        return self._sse

    def _disconnect(self) -> None:
        sse, stack = self._sse, self._stack
        self._sse, self._stack = None, None
        closer = getattr(sse, "close", None)  # the decoder is a generator
        if closer is not None:
            closer()
        if stack is not None:
            stack.close()

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        while not self._closed:
            sse = self._connect()
            try:
                with translated(self._http.where, "events"):
                    message = sse.__next__()
            except (StopIteration, ConnectError):
                # The server ended the stream (a restart, a reader too
                # slow): resume after the last event received.
                self._disconnect()
                continue
            except BaseException:
                with _sio.shielded():
                    self.close()
                raise
            if not message.data:
                continue
            event = Event.from_json(decode_json(message.data.encode(), "event"))
            self.last_seq = event.seq
            return event
        raise StopIteration

    def close(self) -> None:
        """Stop the stream and close its connection."""
        self._closed = True
        self._disconnect()

    def __enter__(self) -> EventStream:
        self._connect()
        return self

