"""The SDK's tests run against a real ``sbx serve``, built from this checkout
($SBX_BIN, set by ``make test``), with its own --root, --run-root and socket
under a temporary directory.

The whole test process moves into a network namespace it creates, standing
in for the host: the server's bridge, its NAT rules and its TCP listener on
127.0.0.1 live there, and no traffic reaches the machine's own network. At
the end every sandbox is removed, the server stopped, ``sbx gc`` run, and
the test fails if anything of its sandboxes is left (mounts, directories,
cgroups).
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "sdk" / "python" / "src"))

import sbx  # noqa: E402

TOKEN = "sdk-test-token-0123456789abcdef"
CLONE_NEWNET = 0x40000000
NETNS = f"sbxpy-{os.getpid()}"
# The servers' sandboxes go under a cgroup parent of their own, so the leak
# check sees only this run's cgroups.
CGROUP_PARENT = f"sbx-pytest-{os.getpid()}"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _fail(msg: str) -> None:
    pytest.exit(f"sbx SDK tests: {msg}", returncode=1)


def _run(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload, no-any-return]


def pytest_configure(config: pytest.Config) -> None:
    """Enter a network namespace of our own before any server starts."""
    if hasattr(config, "workerinput"):
        return
    if os.geteuid() != 0:
        _fail("need root: they start sbx serve, which creates namespaces, cgroups and mounts")
    os.environ["SBX_CGROUP_PARENT"] = CGROUP_PARENT
    try:
        _run("ip", "netns", "add", NETNS)
        _run("ip", "-n", NETNS, "link", "set", "lo", "up")
    except (OSError, subprocess.CalledProcessError) as e:
        _fail(f"cannot make the test network namespace (needs iproute2): {e}")
    fd = os.open(f"/run/netns/{NETNS}", os.O_RDONLY)
    try:
        setns = getattr(os, "setns", None)
        if setns is not None:
            setns(fd, CLONE_NEWNET)
        elif ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            _fail(f"setns into {NETNS}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def cgroup_parents() -> list[Path]:
    """The run's cgroup parent in every hierarchy where it exists."""
    return [p for p in [*CGROUP_ROOT.glob(f"*/{CGROUP_PARENT}"), CGROUP_ROOT / CGROUP_PARENT] if p.is_dir()]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Delete the network namespace (it dies with this process) and the
    run's cgroup parents (empty by then: the leak check says otherwise)."""
    subprocess.run(["ip", "netns", "delete", NETNS], capture_output=True)
    for parent in cgroup_parents():
        try:
            parent.rmdir()
        except OSError:
            pass


def sbx_bin() -> str:
    """The sbx binary under test."""
    path = os.environ.get("SBX_BIN") or str(REPO / "bin" / "sbx")
    if not os.access(path, os.X_OK):
        _fail(f"no sbx binary at {path}: run make build, or make test")
    return path


@functools.lru_cache(maxsize=None)
def fixture_roots() -> tuple[Path, Path]:
    """The shared busybox and Debian (python3) roots, built by the Go
    fixture package when missing. Tests must not change them."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    try:
        out = _run(go, "run", "./tests/fixture/cmd/sbx-fixture", "busybox", "debian", cwd=REPO).stdout.split()
    except (OSError, subprocess.CalledProcessError) as e:
        stderr = getattr(e, "stderr", "")
        _fail(f"cannot build the test root filesystems: {e}\n{stderr}")
    return Path(out[0]), Path(out[1])


@dataclass
class Server:
    """A running sbx serve of the tests."""

    dir: Path
    root: Path
    run_root: Path
    socket: Path
    tcp: str
    proc: subprocess.Popen[bytes]
    log: Path
    busybox: Path
    debian: Path
    seen: set[str] = field(default_factory=set)

    @property
    def unix(self) -> str:
        """The server's unix socket as a host string."""
        return f"unix://{self.socket}"

    def sbx(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the sbx CLI on the server's state."""
        return subprocess.run(
            [sbx_bin(), "--root", str(self.root), "--run-root", str(self.run_root), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    def client(self, **kw: object) -> sbx.Client:
        """A sync client of the server, over its unix socket."""
        return sbx.Client(self.unix, token=TOKEN, **kw)  # type: ignore[arg-type]

    def stop(self) -> None:
        """SIGTERM, and wait for the server to exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(base: Path, *extra: str) -> Server:
    """Start sbx serve on a unix socket and 127.0.0.1:0 with a token, and
    wait until it listens on both. It allows the busybox root and
    base/host as host directories."""
    busybox, debian = fixture_roots()
    # Sandboxes in private user namespaces (the default) need their run
    # root reachable by other users (traversable, not readable).
    base.chmod(0o711)
    root, run_root, sock = base / "root", base / "run", base / "sbx.sock"
    token_file, log = base / "token", base / "serve.log"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    (base / "host").mkdir(exist_ok=True)
    args = [
        sbx_bin(), "--log-level", "info", "--root", str(root), "--run-root", str(run_root),
        "serve", "--unix", str(sock), "--listen", "127.0.0.1:0", "--token-file", str(token_file),
        "--watch-interval", "100ms", "--allow-host-dir", str(base / "host"), "--allow-host-dir", str(busybox),
        *extra,
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    tcp = ""
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        found = re.findall(r'msg="sbx serve: listening" addr=(\S+)', text)
        tcp = next((a for a in found if not a.startswith("/")), "")
        if tcp and str(sock) in found:
            break
        if proc.poll() is not None:
            _fail(f"sbx serve exited with {proc.returncode}:\n{text}")
        time.sleep(0.05)
    else:
        proc.kill()
        _fail(f"sbx serve did not listen within 30 s:\n{log.read_text(errors='replace')}")
    return Server(base, root, run_root, sock, tcp, proc, log, busybox, debian)


def assert_nothing_left(server: Server) -> list[str]:
    """What the server's sandboxes left behind: mounts seen by any process,
    state directories, cgroups."""
    left: list[str] = []
    for mountinfo in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            if str(server.run_root) in mountinfo.read_text():
                left.append(f"process {mountinfo.parent.name} sees a mount under {server.run_root}")
        except OSError:
            pass
    for d in (server.run_root / "sandboxes", server.root / "sandboxes"):
        if d.is_dir() and any(d.iterdir()):
            left.append(f"{d} still holds {sorted(p.name for p in d.iterdir())}")
    for parent in cgroup_parents():
        for cg in parent.iterdir():
            if cg.is_dir() and cg.name in server.seen:
                left.append(f"cgroup {cg}")
    return left


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """The session's sbx serve, with the images "busybox" (busybox-static)
    and "python:3.12" (a Debian root with python3, standing in for the
    registry image the machine cannot reach) in its cache."""
    base = Path(tempfile.mkdtemp(prefix="sbxpy-"))
    srv = start_server(base)
    try:
        with srv.client(timeout=120) as c:
            c.images.import_archive(srv.busybox, name="busybox")
            c.images.import_archive(srv.debian, name="python:3.12")
        yield srv
    finally:
        cleanup(srv)
        # The last server is gone: nothing may be left under the parent.
        left = [str(cg) for parent in cgroup_parents() for cg in parent.iterdir() if cg.is_dir()]
        if left:
            pytest.fail(f"leaked cgroups: {left}", pytrace=False)


def cleanup(srv: Server) -> None:
    """Remove every sandbox, stop the server, collect, and check for leaks."""
    problems: list[str] = []
    try:
        with srv.client(timeout=60) as c:
            for sb in c.sandboxes.list():
                srv.seen.add(sb.id)
                sb.remove()
    except sbx.SbxError as e:
        problems.append(f"cleanup: {e}")
    srv.stop()
    gc = srv.sbx("gc")
    if gc.returncode != 0:
        problems.append(f"sbx gc: {gc.stderr}")
    listing = srv.sbx("ps", "-a", "-q")
    for sid in listing.stdout.split():
        srv.seen.add(sid)
        srv.sbx("rm", "-f", sid)
    problems += assert_nothing_left(srv)
    if not problems:
        shutil.rmtree(srv.dir, ignore_errors=True)
    else:
        pytest.fail("leaks after the tests:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def client(server: Server) -> Iterator[sbx.Client]:
    """A sync client of the session's server."""
    with server.client() as c:
        yield c


@pytest.fixture
def busybox(server: Server, client: sbx.Client) -> Iterator[sbx.Sandbox]:
    """A fresh busybox sandbox, removed after the test."""
    with client.sandboxes.create("busybox", labels={"test": "sdk"}) as sb:
        server.seen.add(sb.id)
        yield sb


@pytest.fixture
def anyio_backend() -> str:
    """The async tests run on asyncio."""
    return "asyncio"
