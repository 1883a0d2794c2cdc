"""A sandbox and what runs in it: commands, streamed commands, shell
sessions and files.

The sync twin in ../_sync/ is generated from this file by
sdk/python/scripts/gen_sync.py.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import IO, Any, AsyncGenerator, AsyncIterator, Mapping, Optional, Union

from .. import _aio, _tar
from .._transport import translated
from .._errors import CommandError, CommandTimeoutError, NotFoundError, ProtocolError
from .._models import (
    ArchiveResult,
    Change,
    ExecResult,
    ExecutorInfo,
    Exit,
    Image,
    Listing,
    LogFrame,
    LogOutput,
    OutputChunk,
    ProcessInfo,
    SandboxRecord,
    SessionInfo,
    Snapshot,
    SessionResult,
    Stats,
)
from .._units import Duration, go_duration
from .._wire import (
    Command,
    Env,
    ExecCall,
    Frame,
    exec_call,
    frame_error,
    octal_mode,
    sandbox_path,
    session_run_body,
)
from ._http import AsyncClosing, AsyncHTTP, download_to, ndjson

#: What files.read and files.read_bytes accept by default, in bytes.
MAX_READ_BYTES = 128 << 20
#: What files.download accepts by default, in bytes of archive.
MAX_DOWNLOAD_BYTES = 1 << 30


def _check(call: ExecCall, result: ExecResult, check: bool) -> ExecResult:
    if result.timed_out and call.timeout_s is not None:
        raise CommandTimeoutError(result, call.label, call.timeout_s)
    if check and result.exit_code != 0:
        raise CommandError(result, call.label)
    return result


class AsyncSandbox:
    """A sandbox on the server. Obtain one from ``client.sandboxes``.

    ``record`` is the server's record as of the last call that returned it
    (:meth:`refresh` reads it again); ``files`` reads and writes files
    inside. Used as a context manager, the sandbox is removed at the end of
    the block."""

    def __init__(self, http: AsyncHTTP, record: SandboxRecord) -> None:
        self._http = http
        self.record = record
        self.files = AsyncFiles(self)

    def __repr__(self) -> str:
        return f"<Sandbox {self.id} {self.name or ''} {self.status}>".replace("  ", " ")

    @property
    def id(self) -> str:
        """The sandbox's id."""
        return self.record.id

    @property
    def name(self) -> Optional[str]:
        """The sandbox's name, if it has one."""
        return self.record.name

    @property
    def status(self) -> str:
        """creating, running, paused, stopped or removing, as of the last
        reply (see :meth:`refresh`)."""
        return self.record.status

    def _path(self, suffix: str = "") -> str:
        return sandbox_path(self.id, suffix)

    async def _change(self, action: str, body: Any = None) -> SandboxRecord:
        reply = await self._http.call("POST", self._path("/" + action), what=f"{action} {self.id}", json=body)
        self.record = SandboxRecord.from_json(reply)
        return self.record

    async def refresh(self) -> SandboxRecord:
        """Read the sandbox's record again (status, times, pids, network)
        and return it."""
        reply = await self._http.call("GET", self._path(), what=f"inspect {self.id}")
        self.record = SandboxRecord.from_json(reply)
        return self.record

    async def exec(
        self,
        cmd: Command,
        *,
        env: Optional[Env] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        stdin: Optional[Union[str, bytes]] = None,
        timeout: Optional[Duration] = None,
        max_output_bytes: Optional[int] = None,
        check: bool = False,
    ) -> ExecResult:
        """Run a command in the sandbox and wait for it to end.

        ``cmd`` is an argv list, or a string run with ``/bin/sh -c``. ``env``
        adds variables, ``cwd`` and ``user`` ("name", "uid" or "uid:gid")
        override the sandbox's defaults, ``stdin`` is fed to the command.
        ``timeout`` (seconds, a timedelta or "30s") stops the command's whole
        process group when it passes (SIGTERM, SIGKILL 2 s later) and raises CommandTimeoutError (its
        ``result`` has the output so far). ``max_output_bytes`` caps stdout
        and stderr each (default 1 MiB; the middle is cut). With
        ``check=True`` a non-zero exit raises CommandError.

        Returns an ExecResult: ``stdout``, ``stderr``, ``exit_code`` (127:
        not found, 126: not executable, 128+n: signal n) and ``report``.
        Without a timeout the call waits as long as the command runs (up to
        the server's --proxy-timeout). Interrupting the call (Ctrl-C, task
        cancellation) closes the connection, which stops the command the same
        way."""
        call = exec_call(locals())
        reply = await self._http.call(
            "POST", self._path("/exec"), what=f"exec in {self.id}", json=call.body, timeout=call.deadline_s
        )
        return _check(call, ExecResult.from_json(reply), check)

    def exec_stream(
        self,
        cmd: Command,
        *,
        env: Optional[Env] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        stdin: Optional[Union[str, bytes]] = None,
        timeout: Optional[Duration] = None,
        check: bool = False,
    ) -> AsyncExecStream:
        """Run a command and stream its output as it is produced.

        Takes the arguments of :meth:`exec`. Iterating the returned stream
        yields OutputChunk objects (``.stream`` is "stdout" or "stderr",
        ``.data`` the text); once it is exhausted, ``stream.result`` holds
        the ExecResult (its stdout and stderr are empty: the output was
        streamed). Leaving the loop early, closing the stream or cancelling
        the task kills the command. A command that runs past ``timeout``
        raises CommandTimeoutError at the end of the stream."""
        call = exec_call(locals())
        return AsyncExecStream(self._http, self._path("/exec"), call, check, f"exec in {self.id}")

    async def exec_detached(
        self,
        cmd: Command,
        *,
        env: Optional[Env] = None,
        cwd: Optional[str] = None,
        user: Optional[str] = None,
        timeout: Optional[Duration] = None,
    ) -> int:
        """Start a command in the background and return its pid inside the
        sandbox at once, as ``docker exec -d`` does. It gets no input or
        output and runs on until it ends, ``timeout`` passes (its process
        group is killed) or the sandbox stops. Takes the arguments of
        :meth:`exec`; a command that cannot start raises CommandError with
        exit code 127 (not found) or 126 (not executable)."""
        call = exec_call(locals())
        body = {**call.body, "detach": True}
        reply = await self._http.call("POST", self._path("/exec"), what=f"exec -d in {self.id}", json=body)
        res = ExecResult.from_json(reply)
        if res.pid > 0:
            return res.pid
        if res.exit_code in (126, 127):
            raise CommandError(res, call.label)
        raise ProtocolError(f"exec -d in {self.id}: the server sent neither a pid nor a failed start")

    async def session(
        self,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        shell: Optional[str] = None,
        user: Optional[str] = None,
    ) -> AsyncSession:
        """Start a persistent shell session (OpenHands semantics): working
        directory, variables, functions and aliases persist between
        commands. ``shell`` is "bash", "sh", a path or a command line
        (default: bash if present, else sh). Close it when done, or use it
        as a context manager."""
        body: dict[str, Any] = {}
        for key, value in (("cwd", cwd), ("shell", shell), ("user", user)):
            if value is not None:
                body[key] = value
        if env is not None:
            body["env"] = dict(env)
        reply = await self._http.call("POST", self._path("/sessions"), what=f"new session in {self.id}", json=body)
        return AsyncSession(self, SessionInfo.from_json(reply))

    async def sessions(self) -> list[AsyncSession]:
        """The sandbox's open shell sessions, to use again (e.g. the
        session a create's ``cmd`` runs in)."""
        reply = await self._http.call("GET", self._path("/sessions"), what=f"sessions of {self.id}")
        items = reply.get("sessions") if isinstance(reply, dict) else None
        if not isinstance(items, list):
            raise ProtocolError("sessions: the server sent no list")
        return [AsyncSession(self, SessionInfo.from_json(s)) for s in items]

    async def get_session(self, session_id: str) -> AsyncSession:
        """An open session by id (NotFoundError when there is none)."""
        for s in await self.sessions():
            if s.id == session_id:
                return s
        raise NotFoundError(404, "not_found", f"sandbox {self.id} has no session {session_id}")

    async def stats(self) -> Stats:
        """CPU, memory, OOM kills and processes now, from the sandbox's
        cgroups."""
        return Stats.from_json(await self._http.call("GET", self._path("/stats"), what=f"stats of {self.id}"))

    async def pause(self) -> SandboxRecord:
        """Freeze every process of the sandbox (cgroup freezer)."""
        return await self._change("pause")

    async def resume(self) -> SandboxRecord:
        """Thaw a paused sandbox."""
        return await self._change("resume")

    async def start(self) -> SandboxRecord:
        """Start a stopped sandbox again on its kept root."""
        return await self._change("start")

    async def stop(self, timeout: Optional[Duration] = None, *, checkpoint: bool = False) -> SandboxRecord:
        """Stop the sandbox: SIGTERM to its PID 1, SIGKILL after ``timeout``
        (seconds, a timedelta or "5s"; default the server's). The root is
        kept: :meth:`start` runs it again. With ``checkpoint`` its processes
        are checkpointed instead (CRIU on the server), and :meth:`start`
        resumes them where they were."""
        body: Optional[dict[str, Any]] = None if timeout is None else {"timeout": go_duration(timeout, "timeout")}
        if checkpoint:
            body = {**(body or {}), "checkpoint": True}
        return await self._change("stop", body)

    async def checkpoint(self, snapshot: Optional[str] = None, *, leave_running: bool = False) -> Snapshot:
        """Write the sandbox's processes, writable layer and record to a
        snapshot on the server (named ``snapshot``, else after the sandbox
        and the time). The sandbox stops unless ``leave_running``;
        :meth:`Sandboxes.restore` starts new sandboxes from the snapshot."""
        body: dict[str, Any] = {"leave_running": leave_running}
        if snapshot is not None:
            body["snapshot"] = snapshot
        reply = await self._http.call("POST", self._path("/checkpoint"), what=f"checkpoint {self.id}", json=body, timeout=None)
        await self.refresh()
        return Snapshot.from_json(reply)

    async def fork(self, n: int = 1) -> list[AsyncSandbox]:
        """Start ``n`` running copies of the sandbox, which runs on: each
        with its own id, writable layer, memory and network."""
        reply = await self._http.call("POST", self._path("/fork"), what=f"fork {self.id}", json={"count": n}, timeout=None)
        items = reply.get("sandboxes") if isinstance(reply, dict) else None
        if not isinstance(items, list):
            raise ProtocolError(f"fork {self.id}: the server sent no list")
        return [AsyncSandbox(self._http, SandboxRecord.from_json(s)) for s in items]

    async def commit(self, name: str) -> Image:
        """Store the sandbox's writable layer as a new image ``name`` in the
        server's cache (a running sandbox is paused meanwhile)."""
        reply = await self._http.call("POST", self._path("/commit"), what=f"commit {self.id}", json={"name": name})
        return Image.from_json(reply)

    async def logs(self, *, since: int = 0, tail: Optional[int] = None) -> LogOutput:
        """The output of the sandbox's main command (a create's ``cmd``) that
        is still held: from offset ``since``, or only its last ``tail``
        bytes. Also after the command ended and the sandbox stopped."""
        out: dict[str, list[str]] = {"stdout": [], "stderr": []}
        lost = end = 0
        async for frame in self._log_frames(since, tail, follow=False):
            if frame.type in out:
                out[frame.type].append(frame.data)
            elif frame.type == "gap":
                lost += frame.lost
            elif frame.type == "end":
                end = frame.offset
        return LogOutput(stdout="".join(out["stdout"]), stderr="".join(out["stderr"]), lost=lost, end=end)

    async def follow_logs(self, *, since: int = 0, tail: Optional[int] = None) -> AsyncIterator[LogFrame]:
        """Yield the main command's output as it comes (stdout, stderr and
        gap frames) until the command has ended for good, as ``sbx logs
        -f`` does. Resume after a disconnect with ``since=`` the offset
        after the last frame's data."""
        async for frame in self._log_frames(since, tail, follow=True):
            if frame.type != "end":
                yield frame

    async def _log_frames(self, since: int, tail: Optional[int], follow: bool) -> AsyncIterator[LogFrame]:
        params: dict[str, Any] = {"since": since}
        if tail is not None:
            params["tail"] = tail
        if follow:
            params["follow"] = "1"
        what = f"logs of {self.id}"
        async with self._http.stream("GET", self._path("/logs"), what=what, params=params, timeout=None) as resp:
            async for raw in ndjson(resp, what):
                frame = LogFrame.from_json(raw)
                yield frame
                if frame.type == "end":
                    return
        raise ProtocolError(f"{what}: the stream was cut before its end")

    async def wait(self) -> Exit:
        """Wait until the sandbox's main command has ended for good and say
        how (also after the sandbox stopped, from any client)."""
        return Exit.from_json(await self._http.call("POST", self._path("/wait"), what=f"wait for {self.id}", timeout=None))

    async def signal(self, signal: str = "SIGTERM") -> None:
        """Send ``signal`` (a name such as "SIGTERM") to the sandbox's main
        command."""
        await self._http.call("POST", self._path("/signal"), what=f"signal {self.id}", json={"signal": signal})

    async def renew(self) -> SandboxRecord:
        """Renew the sandbox's owner lease (``lease`` of create): it now
        expires ``lease`` from now (never after its ``ttl``). A sandbox
        created without a lease raises ConflictError."""
        return await self._change("renew")

    async def rename(self, name: str) -> SandboxRecord:
        """Give the sandbox the new unique name ``name`` ("" drops its name);
        a name in use raises ConflictError."""
        return await self._change("rename", {"name": name})

    async def set_egress(self, egress: str) -> SandboxRecord:
        """Replace the egress policy of the running bridged sandbox, as the
        create option ``egress``: "default", "none", or CIDRs and host names
        ("api.openai.com", "*.example.org", "**.example.org", ":PORT",
        "!ENTRY" to deny). The rules change at once, in one batch."""
        return await self._change("egress", {"egress": egress})

    async def top(self) -> list[ProcessInfo]:
        """The processes of the running sandbox, as ``docker top`` lists
        them."""
        reply = await self._http.call("GET", self._path("/top"), what=f"top of {self.id}")
        items = reply.get("processes") if isinstance(reply, dict) else None
        if not isinstance(items, list):
            raise ProtocolError(f"top of {self.id}: the server sent no list")
        return [ProcessInfo.from_json(p) for p in items]

    async def diff(self) -> list[Change]:
        """What the sandbox changed in its root over its image, sorted by
        path, as ``docker diff`` lists it (sbx's own files left out)."""
        reply = await self._http.call("GET", self._path("/diff"), what=f"diff of {self.id}")
        items = reply.get("changes") if isinstance(reply, dict) else None
        if not isinstance(items, list):
            raise ProtocolError(f"diff of {self.id}: the server sent no list")
        return [Change.from_json(c) for c in items]

    async def export(self, dest: Union[str, os.PathLike[str], IO[bytes]]) -> None:
        """Write the sandbox's root file system (its image with its changes)
        as one tar to ``dest``, as ``docker export`` does: a local path,
        which appears only once the tar is complete, or a binary file
        object. A running sandbox is paused meanwhile; volumes and tmpfs
        mounts are not in it."""
        await download_to(self._http, dest, "GET", self._path("/export"), what=f"export {self.id}")

    async def info(self) -> ExecutorInfo:
        """CPU, memory, disk and pids as the sandbox's executor sees them
        inside (for the host's own figures see :meth:`stats`)."""
        return ExecutorInfo.from_json(await self._http.call("GET", self._path("/info"), what=f"info of {self.id}"))

    async def connect_port(self, port: int) -> AsyncPortConnection:
        """A TCP connection to ``port`` on the sandbox's loopback, tunnelled
        through the server as a port-forward (no published port needed;
        any network mode). ``send`` and ``receive`` bytes on it; close it,
        or leave its ``with`` block, when done. Nothing listening there
        raises BadGatewayError."""
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"port {port!r}: want an integer from 1 to 65535")
        what = f"connect to port {port} of {self.id}"
        stack = AsyncExitStack()
        try:
            resp = await stack.enter_async_context(
                self._http.stream(
                    "GET",
                    self._path(f"/ports/{port}/connect"),
                    what=what,
                    headers={"Connection": "Upgrade", "Upgrade": "sbx-port"},
                    timeout=None,
                )
            )
            stream = resp.extensions.get("network_stream")
            if resp.status_code != 101 or stream is None:
                raise ProtocolError(f"{what}: the server answered {resp.status_code}, not 101 Switching Protocols")
        except BaseException:
            with _aio.shielded():
                await stack.aclose()
            raise
        return AsyncPortConnection(self._http.where, what, stream, stack)

    async def remove(self, force: bool = True) -> None:
        """Remove the sandbox and everything it created on the host. A
        running sandbox is killed unless ``force`` is False (then a running
        one raises ConflictError)."""
        await self._http.call(
            "DELETE", self._path(), what=f"remove {self.id}", params={"force": "true" if force else "false"}
        )
        self._http.leases.forget(self.id)
        self.record = SandboxRecord.from_json({**self.record.raw, "status": "removed"})

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        try:
            await self.remove()
        except NotFoundError:
            pass


class AsyncPortConnection(AsyncClosing):
    """A TCP connection into a sandbox; see :meth:`Sandbox.connect_port`."""

    def __init__(self, where: str, what: str, stream: Any, stack: AsyncExitStack) -> None:
        self._where, self._what, self._stream, self._stack = where, what, stream, stack

    async def send(self, data: bytes) -> None:
        """Send all of ``data``."""
        with translated(self._where, self._what):
            await self._stream.write(bytes(data))

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Up to ``max_bytes`` bytes as soon as some arrive; b"" once the
        other side closed the connection."""
        with translated(self._where, self._what):
            data: bytes = await self._stream.read(max_bytes)
            return data

    async def aclose(self) -> None:
        """Close the connection."""
        try:
            await self._stream.aclose()
        finally:
            await self._stack.aclose()


class AsyncExecStream(AsyncClosing):
    """The output of a streamed command; see :meth:`Sandbox.exec_stream`.

    The command starts when the stream is entered (``with``) or first
    iterated. Iterate it for OutputChunk objects; ``result`` is the
    ExecResult once the stream is exhausted (None before). :meth:`wait`
    skips the rest of the output and returns the result. Closing the stream
    before the end kills the command."""

    def __init__(self, http: AsyncHTTP, path: str, call: ExecCall, check: bool, what: str) -> None:
        self._http = http
        self._path = path
        self._call = call
        self._check = check
        self._what = what
        self.result: Optional[ExecResult] = None
        self._stack: Optional[AsyncExitStack] = None
        self._frames: Optional[AsyncGenerator[Frame, None]] = None
        self._done = False

    async def _start(self) -> AsyncGenerator[Frame, None]:
        if self._frames is None:
            stack = AsyncExitStack()
            try:
                resp = await stack.enter_async_context(
                    self._http.stream(
                        "POST",
                        self._path,
                        what=self._what,
                        params={"stream": "1"},
                        json=self._call.body,
                        timeout=self._call.deadline_s,
                    )
                )
            except BaseException:
                with _aio.shielded():
                    await stack.aclose()
                raise
            self._stack, self._frames = stack, ndjson(resp, self._what)
        return self._frames

    def __aiter__(self) -> AsyncExecStream:
        return self

    async def __anext__(self) -> OutputChunk:
        if self._done:
            raise StopAsyncIteration
        frames = await self._start()
        try:
            async for frame in frames:
                kind = frame.get("type")
                if kind in ("stdout", "stderr"):
                    data = frame.get("data")
                    if not isinstance(data, str):
                        raise ProtocolError(f"{self._what}: an output frame without text")
                    return OutputChunk(str(kind), data)
                if kind == "result":
                    self.result = ExecResult.from_json(frame.get("result"))
                    break
                if kind == "error":
                    raise frame_error(frame)
        except BaseException:
            with _aio.shielded():
                await self.aclose()
            raise
        await self.aclose()
        if self.result is None:
            raise ProtocolError(f"{self._what}: the stream ended without a result")
        _check(self._call, self.result, self._check)
        raise StopAsyncIteration

    async def wait(self) -> ExecResult:
        """Skip the remaining output, wait for the command to end and return
        its result."""
        async for _ in self:
            pass
        if self.result is None:
            raise ProtocolError(f"{self._what}: the stream was closed before the command ended")
        return self.result

    async def aclose(self) -> None:
        """Stop reading and close the connection; a command still running is
        killed."""
        self._done = True
        frames, stack = self._frames, self._stack
        self._frames, self._stack = None, None
        if frames is not None:
            await frames.aclose()
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> AsyncExecStream:
        await self._start()
        return self



class AsyncSession(AsyncClosing):
    """A persistent shell in a sandbox, used the way AI agents use a
    terminal (OpenHands semantics); see :meth:`Sandbox.session`.

    Each :meth:`run` returns a SessionResult. Timeouts never kill a command:
    a command still running after ``timeout`` (default 120 s) or
    ``no_output_timeout`` (default 30 s without output) comes back with
    status "running"; :meth:`read` collects more output, :meth:`send_input`
    answers prompts, :meth:`interrupt` sends Ctrl-C."""

    def __init__(self, sandbox: AsyncSandbox, info: SessionInfo) -> None:
        self.sandbox = sandbox
        self.info = info

    def __repr__(self) -> str:
        return f"<Session {self.id} in {self.sandbox.id}>"

    @property
    def id(self) -> str:
        """The session's id."""
        return self.info.id

    async def _run(
        self,
        command: str,
        is_input: bool,
        timeout: Optional[Duration],
        no_output_timeout: Optional[Duration],
        max_output_bytes: Optional[int],
        stop_signal: Optional[str] = None,
        stop_grace: Optional[Duration] = None,
    ) -> SessionResult:
        body, deadline = session_run_body(
            command,
            is_input=is_input,
            timeout=timeout,
            no_output_timeout=no_output_timeout,
            max_output_bytes=max_output_bytes,
            stop_signal=stop_signal,
            stop_grace=stop_grace,
        )
        reply = await self.sandbox._http.call(
            "POST",
            self.sandbox._path(f"/sessions/{self.id}/run"),
            what=f"session {self.id} in {self.sandbox.id}",
            json=body,
            timeout=deadline,
        )
        return SessionResult.from_json(reply)

    async def run(
        self,
        command: str,
        *,
        timeout: Optional[Duration] = None,
        no_output_timeout: Optional[Duration] = None,
        max_output_bytes: Optional[int] = None,
        stop_signal: Optional[str] = None,
        stop_grace: Optional[Duration] = None,
    ) -> SessionResult:
        """Run ``command`` (any shell input: pipes, heredocs, many lines) in
        the session and return what it printed. While another command runs
        the result's status is "busy" and nothing was run.

        A timeout leaves the command running (status "running") unless
        ``stop_signal`` is given ("SIGTERM", "SIGINT", a number): then the
        timeout, or this call ending early, stops the command as an exec's
        is stopped: that signal to its job, SIGKILL ``stop_grace`` later
        (default 2 s), a fresh shell if even that does not bring the prompt
        back; the result says how it ended, with the timeout as ``reason``."""
        if not command:
            raise ValueError("command is empty; use read() to collect the output of a running command")
        return await self._run(command, False, timeout, no_output_timeout, max_output_bytes, stop_signal, stop_grace)

    async def read(
        self, *, timeout: Optional[Duration] = None, no_output_timeout: Optional[Duration] = None
    ) -> SessionResult:
        """Collect the output a running command produced since the last
        reply, waiting under the timeouts; status "completed" once it ended.
        NotRunningError when nothing runs."""
        return await self._run("", False, timeout, no_output_timeout, None)

    async def send_input(
        self, text: str, *, timeout: Optional[Duration] = None, no_output_timeout: Optional[Duration] = None
    ) -> SessionResult:
        """Type ``text`` and a newline into the running program (an answer to
        a prompt, a line for ``cat``). "C-c", "C-d", "C-z" and "C-\\\\" send
        that control character alone. NotRunningError when nothing runs."""
        return await self._run(text, True, timeout, no_output_timeout, None)

    async def interrupt(self, *, timeout: Optional[Duration] = None) -> SessionResult:
        """Send Ctrl-C to the running command and return its last output."""
        return await self._run("C-c", True, timeout, None, None)

    async def aclose(self) -> None:
        """End the session: its shell and every process it started are
        killed. Closing a closed session does nothing."""
        try:
            await self.sandbox._http.call(
                "DELETE", self.sandbox._path(f"/sessions/{self.id}"), what=f"close session {self.id}"
            )
        except NotFoundError:
            pass




class AsyncFiles:
    """Files inside a sandbox (``sandbox.files``). Paths are paths inside the
    sandbox; every operation happens there, through its executor.

    A missing path raises NoSuchFileError (a FileNotFoundError), a directory
    where a file is wanted IsDirectoryError (an IsADirectoryError)."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sb = sandbox

    async def read_bytes(self, path: str, *, max_bytes: int = MAX_READ_BYTES) -> bytes:
        """The contents of the file at ``path``; a file larger than
        ``max_bytes`` raises ProtocolError (use :meth:`download` for big
        files)."""
        data: bytes = await self._sb._http.call(
            "GET",
            self._sb._path("/files"),
            what=f"read {path}",
            params={"path": path},
            file_op=True,
            max_bytes=max_bytes,
            raw=True,
        )
        return data

    async def read(
        self,
        path: str,
        *,
        start_line: Optional[int] = None,
        end_line: Optional[int] = None,
        encoding: str = "utf-8",
        max_bytes: int = MAX_READ_BYTES,
    ) -> str:
        """The text of the file at ``path``, or of lines ``start_line`` to
        ``end_line`` (1-based, inclusive). Raises UnicodeDecodeError for
        bytes that are not ``encoding``: use :meth:`read_bytes` for binary
        files."""
        params: dict[str, Any] = {"path": path}
        if start_line is not None:
            params["start_line"] = start_line
        if end_line is not None:
            params["end_line"] = end_line
        data: bytes = await self._sb._http.call(
            "GET", self._sb._path("/files"), what=f"read {path}", params=params, file_op=True, max_bytes=max_bytes, raw=True
        )
        return data.decode(encoding)

    async def write(self, path: str, data: Union[str, bytes], *, mode: Optional[int] = None) -> int:
        """Write ``data`` (text is encoded as UTF-8) to ``path`` atomically,
        creating missing parent directories; ``mode`` sets the permission
        bits (e.g. 0o755). Returns the number of bytes written."""
        content = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        params = {"path": path}
        octal = octal_mode(mode)
        if octal is not None:
            params["mode"] = octal
        reply = await self._sb._http.call(
            "PUT",
            self._sb._path("/files"),
            what=f"write {path}",
            params=params,
            content=content,
            headers={"Content-Type": "application/octet-stream"},
            file_op=True,
        )
        written = reply.get("bytes") if isinstance(reply, dict) else None
        return written if isinstance(written, int) else len(content)

    async def list(self, path: str) -> Listing:
        """The entries of the directory at ``path``, directories first."""
        reply = await self._sb._http.call(
            "GET", self._sb._path("/fs/list"), what=f"list {path}", params={"path": path}, file_op=True
        )
        return Listing.from_json(reply)

    async def upload(self, local_path: Union[str, os.PathLike[str]], remote_dir: str) -> ArchiveResult:
        """Copy a local file or directory (with everything under it) into the
        directory ``remote_dir`` of the sandbox, created if missing; it lands
        as ``remote_dir/<its name>``. All or nothing: an archive entry that
        would land outside ``remote_dir`` fails the whole upload."""
        chunks = _tar.tar_chunks(local_path)
        reply = await self._sb._http.call(
            "PUT",
            self._sb._path("/fs/archive"),
            what=f"upload {os.fspath(local_path)}",
            params={"path": remote_dir},
            content=_aio.iterate(chunks),
            headers={"Content-Type": "application/x-tar"},
            timeout=None,
            file_op=True,
        )
        return ArchiveResult.from_json(reply)

    async def download(
        self,
        remote_path: str,
        local_path: Union[str, os.PathLike[str]],
        *,
        max_bytes: Optional[int] = MAX_DOWNLOAD_BYTES,
    ) -> Path:
        """Copy the file or directory ``remote_path`` out of the sandbox: into
        ``local_path`` when that is an existing directory, else to
        ``local_path`` itself. Returns the local path written.

        What comes out of a sandbox is untrusted: nothing is written outside
        the destination (also not through links), hard links must stay in
        the archive, device files and FIFOs are refused, set-id bits are
        cleared, and only the requested entry is kept; symbolic links are
        copied as links. An archive over ``max_bytes`` (None: no cap) raises
        ProtocolError."""
        name = os.path.basename(remote_path.rstrip("/"))
        if not name:
            raise ValueError(f"download: {remote_path!r} names no file or directory")
        spool = _tar.SpooledDownload(max_bytes, f"download {remote_path}")
        try:
            async with self._sb._http.stream(
                "GET",
                self._sb._path("/fs/archive"),
                what=f"download {remote_path}",
                params={"path": remote_path},
                timeout=None,
                file_op=True,
            ) as resp:
                async for chunk in resp.aiter_bytes():
                    await _aio.run_sync(spool.write, chunk)
            return await _aio.run_sync(_tar.extract_download, spool, name, local_path)
        finally:
            spool.close()

    async def _edit(self, body: dict[str, Any]) -> str:
        reply = await self._sb._http.call(
            "POST", self._sb._path("/files/edit"), what=f"{body['command']} {body['path']}", json=body, file_op=True
        )
        out = reply.get("output") if isinstance(reply, dict) else None
        if not isinstance(out, str):
            raise ProtocolError("edit: the server sent no output")
        return out

    async def view(self, path: str, *, view_range: Optional[tuple[int, int]] = None) -> str:
        """The file at ``path`` with numbered lines (lines ``view_range`` =
        (first, last), last -1 for the end), or a directory's tree, as the
        OpenHands editor shows them."""
        body: dict[str, Any] = {"command": "view", "path": path}
        if view_range is not None:
            body["view_range"] = list(view_range)
        return await self._edit(body)

    async def create(self, path: str, text: str) -> str:
        """Create a new file with ``text``; ExistsError when the path
        exists."""
        return await self._edit({"command": "create", "path": path, "file_text": text})

    async def str_replace(self, path: str, old: str, new: str) -> str:
        """Replace the only occurrence of ``old`` in the file with ``new`` and
        return a snippet of the result; NoMatchError or MultipleMatchesError
        (with ``lines``) when ``old`` is not there exactly once."""
        return await self._edit({"command": "str_replace", "path": path, "old_str": old, "new_str": new})

    async def insert(self, path: str, line: int, text: str) -> str:
        """Insert ``text`` after line ``line`` (0: at the top)."""
        return await self._edit({"command": "insert", "path": path, "insert_line": line, "new_str": text})

    async def undo_edit(self, path: str) -> str:
        """Undo the last edit of the file; NoHistoryError when there is
        none."""
        return await self._edit({"command": "undo_edit", "path": path})
