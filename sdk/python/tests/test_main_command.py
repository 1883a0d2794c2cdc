"""The main command of a sandbox (a create's ``cmd``): logs, follow_logs,
wait and signal, against a real server."""

from __future__ import annotations

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
