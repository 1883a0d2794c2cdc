"""The main command of a sandbox (a create's ``cmd``): logs, follow_logs,
wait and signal, against a real server."""

from __future__ import annotations

import time

import pytest

import sbx
from conftest import Server


def test_logs_follow_wait(client: sbx.Client, server: Server) -> None:
    script = "echo out-1; echo err-1 >&2; i=0; while [ $i -lt 5 ]; do i=$((i+1)); echo tick $i; sleep 0.1; done; exit 3"
    with client.sandboxes.create("busybox", cmd=["sh", "-c", script]) as sb:
        server.seen.add(sb.id)
        followed = [f for f in sb.follow_logs()]
        stdout = "".join(f.data for f in followed if f.type == "stdout")
        assert stdout == "out-1\ntick 1\ntick 2\ntick 3\ntick 4\ntick 5\n"
        assert "".join(f.data for f in followed if f.type == "stderr") == "err-1\n"
        assert all(isinstance(f, sbx.LogFrame) and f.offset >= 0 for f in followed)
        exit = sb.wait()
        assert isinstance(exit, sbx.Exit) and exit.exit_code == 3 and exit.signal == "" and not exit.oom_killed
        # The record says the command ended; the sandbox runs on.
        rec = sb.refresh()
        assert rec.status == "running" and rec.cmd_exit is not None and rec.cmd_exit.exit_code == 3
        out = sb.logs()
        assert out.stdout == stdout and out.stderr == "err-1\n" and out.lost == 0 and out.end > 0
        # since= resumes where a reader stopped: nothing new after the end.
        assert sb.logs(since=out.end).stdout == ""
        assert sb.logs(tail=7).stdout == "tick 5\n"


def test_signal_and_no_main_command(client: sbx.Client, server: Server) -> None:
    with client.sandboxes.create("busybox", cmd=["sleep", "9112"]) as sb:
        server.seen.add(sb.id)
        sb.signal("SIGTERM")
        exit = sb.wait()
        assert exit.signal == "SIGTERM" and exit.exit_code == 128 + 15
    with client.sandboxes.create("busybox") as plain:
        server.seen.add(plain.id)
        try:
            plain.logs()
        except sbx.APIError as err:
            assert err.status in (409, 422), err
        else:
            raise AssertionError("logs of a sandbox without a main command did not fail")


def test_auto_remove(client: sbx.Client, server: Server) -> None:
    """``auto_remove``: the server removes the sandbox once its command
    ended, or once it was stopped (``docker run -d --rm``)."""

    def gone(sb: sbx.Sandbox) -> bool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                sb.refresh()
            except sbx.NotFoundError:
                return True
            time.sleep(0.05)
        return False

    ended = client.sandboxes.create("busybox", cmd=["sh", "-c", "sleep 0.2"], auto_remove=True)
    server.seen.add(ended.id)
    assert ended.record.spec.get("auto_remove") is True
    assert gone(ended), "the sandbox whose command ended is still there"
    stopped = client.sandboxes.create("busybox", cmd=["sleep", "9131"], auto_remove=True)
    server.seen.add(stopped.id)
    stopped.stop(timeout="1s")
    assert gone(stopped), "the stopped sandbox is still there"
    with pytest.raises(ValueError):
        client.sandboxes.create("busybox", auto_remove=True)
    kept = client.sandboxes.create("busybox", cmd=["true"])
    server.seen.add(kept.id)
    kept.wait()
    time.sleep(0.5)  # five of the server's watch intervals
    assert kept.refresh().status == "running"
    kept.remove()


def test_exited_state_and_restart(client: sbx.Client, server: Server) -> None:
    """A sandbox whose main command ended is exited (``state``), listed by
    ``status="exited"`` and not by ``running=True``; ``restart`` is docker's
    restart policy, its count in ``restart_count``."""
    with client.sandboxes.create("busybox", cmd=["sh", "-c", "echo run; exit 3"], restart="on-failure:2") as sb:
        server.seen.add(sb.id)
        assert sb.record.spec.get("restart") == {"name": "on-failure", "max_retries": 2}
        exit = sb.wait()
        assert exit.exit_code == 3
        rec = sb.refresh()
        assert rec.state == "exited" and rec.restart_count == 2 and rec.cmd_exit is not None
        assert sb.logs().stdout == "run\n" * 3
        assert sb.id in [s.id for s in client.sandboxes.list(status="exited")]
        assert sb.id not in [s.id for s in client.sandboxes.list(running=True)]
    for bad in ("sometimes", "always:2"):
        with pytest.raises(ValueError):
            client.sandboxes.create("busybox", cmd=["true"], restart=bad)
    with pytest.raises(ValueError):
        client.sandboxes.create("busybox", restart="always")


def test_named_volumes(client: sbx.Client, server: Server) -> None:
    """``volumes=["NAME:/path"]`` mounts a named volume (made when missing),
    kept across sandboxes; ``client.volumes`` lists, inspects, refuses to
    remove one in use, removes and prunes."""
    with client.sandboxes.create("busybox", cmd=["sh", "-c", "echo kept > /v/f"], volumes=["sdkvol:/v"]) as sb:
        server.seen.add(sb.id)
        assert sb.wait().exit_code == 0
        info = client.volumes.get("sdkvol")
        assert isinstance(info, sbx.VolumeInfo) and info.used_by == [sb.id] and info.mountpoint
        with pytest.raises(sbx.ConflictError):
            client.volumes.remove("sdkvol")
    with client.sandboxes.create("busybox", volumes=[sbx.NamedVolume("sdkvol", "/v", read_only=True)]) as sb2:
        server.seen.add(sb2.id)
        assert sb2.exec(["cat", "/v/f"]).stdout == "kept\n"
    assert "sdkvol" in [v.name for v in client.volumes.list()]
    client.volumes.create("sdkspare", labels={"k": "v"})
    assert client.volumes.get("sdkspare").labels == {"k": "v"}
    client.volumes.remove("sdkvol")
    assert "sdkspare" in client.volumes.prune().removed
    assert client.volumes.list() == []
    with pytest.raises(sbx.NotFoundError):
        client.volumes.get("sdkvol")
