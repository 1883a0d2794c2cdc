"""The sync client against a real sbx serve: create, exec, streams,
sessions, lifecycle."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest

import sbx
from conftest import Server


def running(sb: sbx.Sandbox, pattern: str) -> list[str]:
    """The processes of the sandbox whose command line contains pattern.
    The tests' commands sleep for 91xx seconds, durations no other test on
    the machine uses, so host-wide process counts of others never see them."""
    out = sb.exec(["ps", "-o", "pid,args"]).stdout
    return [line for line in out.splitlines() if pattern in line and "ps -o" not in line]


def wait_until(cond, what: str, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """Poll cond until it is true, bounded."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_create_with_limits_network_ttl(server: Server, client: sbx.Client) -> None:
    with client.sandboxes.create(
        "python:3.12", memory="512m", cpus=1, pids=128, network="bridge", ttl="1h", name="sdk-limits",
        env={"GREETING": "hi"}, labels={"test": "sdk"}, workdir="/tmp", lease=None,
    ) as sb:  # fmt: skip
        server.seen.add(sb.id)
        rec = sb.record
        assert sb.status == "running" and sb.name == "sdk-limits"
        limits = rec.spec["limits"]
        assert limits["memory_bytes"] == 512 << 20 and limits["pids"] == 128
        assert rec.labels == {"test": "sdk"}
        assert rec.network.get("mode") == "bridge" and str(rec.network.get("ip", "")).count(".") == 3
        assert rec.created and rec.expires_at
        assert abs((rec.expires_at - rec.created) - timedelta(hours=1)) < timedelta(seconds=5)
        # The limits hold inside: the cgroup's memory limit, the environment.
        info = sb.exec(["sh", "-c", "echo $GREETING; pwd"])
        assert info.stdout.split() == ["hi", "/tmp"]
        stats = sb.stats()
        assert stats.memory_limit_bytes == 512 << 20 and stats.pids_limit >= 128
        assert stats.memory_current_bytes > 0 and stats.cpu_time_s >= 0
        # get by name and by id prefix give the same sandbox
        assert client.sandboxes.get("sdk-limits").id == sb.id
        assert client.sandboxes.get(sb.id[:8]).id == sb.id
        assert [s.id for s in client.sandboxes.list(labels={"test": "sdk"})] == [sb.id]
    with pytest.raises(sbx.NotFoundError):
        client.sandboxes.get("sdk-limits")


def test_create_checks_values_before_sending(client: sbx.Client) -> None:
    before = len(client.sandboxes.list())
    with pytest.raises(ValueError, match="memory"):
        client.sandboxes.create("busybox", memory="lots")
    with pytest.raises(ValueError, match="ttl"):
        client.sandboxes.create("busybox", ttl="an hour")
    with pytest.raises(TypeError):
        client.sandboxes.create("busybox", memory=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one"):
        client.sandboxes.create()
    with pytest.raises(ValueError, match="network"):
        client.sandboxes.create("busybox", network="wifi")  # type: ignore[arg-type]
    assert len(client.sandboxes.list()) == before


def test_exec_result_and_report(busybox: sbx.Sandbox) -> None:
    r = busybox.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10)
    assert (r.stdout, r.stderr, r.exit_code, r.ok) == ("out\n", "err\n", 3, False)
    assert r.report.status == "nonzero_exit" and r.report.exit_code == 3 and not r.report.timed_out
    assert r.report.wall_time_s > 0 and r.duration_s == r.report.wall_time_s
    burn = busybox.exec(["sh", "-c", "head -c 30000000 /dev/zero | md5sum; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
    rep = burn.report
    assert rep.cpu_time_s is not None and rep.user_time_s is not None and rep.sys_time_s is not None
    assert 0 < rep.cpu_time_s <= rep.wall_time_s * (os.cpu_count() or 1) + 0.05  # the pipeline runs in parallel
    assert abs(rep.cpu_time_s - rep.user_time_s - rep.sys_time_s) < 1e-6
    assert rep.memory_peak_bytes is not None and rep.memory_peak_bytes > 100_000
    ok = busybox.exec("echo $((6*7))")
    assert ok.stdout == "42\n" and ok.report.status == "ok" and ok.signal is None
    killed = busybox.exec(["sh", "-c", "kill -9 $$"])
    assert killed.exit_code == 137 and killed.signal == "SIGKILL" and killed.report.status == "signaled"
    assert not killed.oom_killed
    assert busybox.exec(["no-such-command"]).exit_code == 127


def test_exec_oom_killed(server: Server, client: sbx.Client) -> None:
    with client.sandboxes.create("busybox", memory="24m", labels={"test": "sdk"}) as sb:
        server.seen.add(sb.id)
        hog = sb.exec(["awk", 'BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }'], timeout=60)
        assert hog.exit_code == 137 and hog.signal == "SIGKILL" and hog.oom_killed
        assert hog.report.status == "oom" and not hog.timed_out
        assert sb.exec("echo alive").stdout == "alive\n"


def test_exec_options(busybox: sbx.Sandbox) -> None:
    r = busybox.exec(["sh", "-c", "echo $A-$B; pwd; id -u; cat"], env={"A": "1", "B": "two"}, cwd="/etc",
                     user="1000", stdin="from stdin\n")  # fmt: skip
    assert r.stdout == "1-two\n/etc\n1000\nfrom stdin\n"
    big = busybox.exec(["sh", "-c", "yes | head -c 300000"], max_output_bytes=1000)
    assert big.truncated and len(big.stdout) < 2000


def test_exec_check_and_timeout(busybox: sbx.Sandbox) -> None:
    with pytest.raises(sbx.CommandError) as err:
        busybox.exec(["sh", "-c", "echo partial; exit 2"], check=True)
    assert err.value.result.exit_code == 2 and err.value.result.stdout == "partial\n"
    start = time.monotonic()
    with pytest.raises(sbx.CommandTimeoutError) as timeout:
        busybox.exec(["sh", "-c", "echo started; sleep 9107"], timeout=0.5)
    assert isinstance(timeout.value, TimeoutError)
    assert timeout.value.result.timed_out and timeout.value.result.stdout == "started\n"
    assert timeout.value.result.report.status == "timeout"
    assert time.monotonic() - start < 20
    wait_until(lambda: not running(busybox, "sleep 9107"), "the timed-out command to be killed")


def test_exec_stream(busybox: sbx.Sandbox) -> None:
    stream = busybox.exec_stream(["sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.05; done; echo done >&2; exit 4"])
    chunks = list(stream)
    assert "".join(c.data for c in chunks if c.stream == "stdout") == "1\n2\n3\n"
    assert "".join(str(c) for c in chunks if c.stream == "stderr") == "done\n"
    assert stream.result is not None and stream.result.exit_code == 4
    # wait() skips the output
    assert busybox.exec_stream("echo hi").wait().exit_code == 0
    with pytest.raises(sbx.CommandError):
        busybox.exec_stream("exit 5", check=True).wait()
    with pytest.raises(sbx.CommandTimeoutError):
        for _ in busybox.exec_stream(["sleep", "9108"], timeout=0.3):
            pass


def test_exec_stream_closed_early_kills_the_command(busybox: sbx.Sandbox) -> None:
    with busybox.exec_stream(["sh", "-c", "echo first; exec sleep 9109"]) as stream:
        for chunk in stream:
            assert chunk.data == "first\n"
            break
    assert stream.result is None
    wait_until(lambda: not running(busybox, "sleep 9109"), "the abandoned command to be killed")


def test_session_keeps_state(busybox: sbx.Sandbox) -> None:
    with busybox.session() as sh:
        first = sh.run("cd /tmp && export X=1")
        assert first.completed and first.exit_code == 0 and first.cwd == "/tmp"
        second = sh.run("echo $X; pwd")
        assert second.output == "1\n/tmp\n" and second.exit_code == 0
        assert sh.run("false").exit_code == 1
        assert [s.id for s in busybox.sessions()] == [sh.id]
        # A command past its timeout keeps running; read() follows it.
        slow = sh.run("echo start; sleep 1; echo end", timeout=0.3)
        assert slow.running and slow.reason == "timeout" and "start" in slow.output
        assert sh.run("echo other").status == "busy"
        rest = sh.read(timeout=10)
        assert rest.completed and "end" in rest.output
        # Input to a program, and Ctrl-C.
        prompt = sh.run("read -r name; echo hello $name", timeout=0.3)
        assert prompt.running
        answered = sh.send_input("sbx", timeout=10)
        assert answered.completed and "hello sbx" in answered.output
        sh.run("sleep 9110", timeout=0.2)
        stopped = sh.interrupt(timeout=10)
        assert stopped.completed and stopped.exit_code != 0
        with pytest.raises(sbx.NotRunningError):
            sh.read()
    assert busybox.sessions() == []
    sh.close()  # closing twice does nothing


def test_session_run_stops_at_its_timeout(busybox: sbx.Sandbox) -> None:
    # With stop_signal the timeout stops the command (its handler runs and
    # its exit code is reported), and the shell's state stays.
    with busybox.session() as sh:
        sh.run("KEPT=k1")
        res = sh.run(
            """sh -c 'trap "echo cleaned; exit 3" TERM; echo started; while :; do sleep 0.05; done'""",
            timeout=1,
            stop_signal="SIGTERM",
            stop_grace="2s",
        )
        assert res.completed and res.exit_code == 3 and res.reason == "timeout", res
        assert "started" in res.output and "cleaned" in res.output
        assert sh.run("echo $KEPT").output == "k1\n"
        with pytest.raises(ValueError):
            sh.run("true", stop_grace="1s")


def test_create_with_cmd_runs_it_as_main_command(client: sbx.Client, server: Server) -> None:
    with client.sandboxes.create("busybox", cmd=["sh", "-c", "echo booted > /tmp/booted; exec sleep 9111"]) as sb:
        server.seen.add(sb.id)
        start = sb.record.cmd_start
        assert start is not None and start.status == "running"
        deadline = time.monotonic() + 10
        while not running(sb, "sleep 9111") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running(sb, "sleep 9111")
        assert sb.exec(["cat", "/tmp/booted"]).stdout == "booted\n"
    with pytest.raises(sbx.NotFoundError):
        sb.refresh()


def test_lifecycle(client: sbx.Client, server: Server) -> None:
    sb = client.sandboxes.create("busybox", name="sdk-life")
    server.seen.add(sb.id)
    try:
        assert sb.pause().status == "paused"
        with pytest.raises(sbx.ConflictError):
            sb.exec(["true"])
        assert sb.resume().status == "running"
        assert sb.stop(timeout="2s").status == "stopped"
        assert sb.refresh().status == "stopped"
        assert sb.start().status == "running"
        assert sb.exec(["true"]).ok
        with pytest.raises(sbx.ConflictError):
            client.sandboxes.create("busybox", name="sdk-life")
        with pytest.raises(sbx.ConflictError):
            sb.remove(force=False)
    finally:
        sb.remove()
    with pytest.raises(sbx.NotFoundError):
        sb.remove()


def test_stats_and_commit(busybox: sbx.Sandbox, client: sbx.Client) -> None:
    busybox.files.write("/committed.txt", "kept\n")
    image = busybox.commit("sdk-committed:v1")
    try:
        assert image.name.endswith("sdk-committed:v1") and image.digest.startswith("sha256:")
        with client.sandboxes.create("sdk-committed:v1") as again:
            assert again.files.read("/committed.txt") == "kept\n"
    finally:
        client.images.remove("sdk-committed:v1")


def test_diff_and_rename(client: sbx.Client) -> None:
    with client.sandboxes.create("busybox", name="sdk-diff") as sb, client.sandboxes.create("busybox", name="sdk-taken") as other:
        sb.exec(["sh", "-c", "echo x > /new; rm /bin/vi"])
        changes = {(c.kind, c.path) for c in sb.diff()}
        assert {("A", "/new"), ("D", "/bin/vi"), ("C", "/bin")} <= changes
        assert not any(p.startswith("/etc/host") or ".sbx" in p for _, p in changes)
        procs = sb.top()
        assert any(p.pid == 1 and p.host_pid > 1 for p in procs) and all(isinstance(p, sbx.ProcessInfo) for p in procs)
        record = sb.rename("sdk-renamed")
        assert record.name == "sdk-renamed" and sb.name == "sdk-renamed"
        assert client.sandboxes.get("sdk-renamed").id == sb.id
        with pytest.raises(sbx.NotFoundError):
            client.sandboxes.get("sdk-diff")
        with pytest.raises(sbx.ConflictError):
            other.rename("sdk-renamed")
        with pytest.raises(sbx.InvalidError):
            other.rename("bad name!")


def test_exec_detached(busybox: sbx.Sandbox) -> None:
    """``exec_detached`` returns the pid at once; the command runs on and
    ``timeout`` still ends it (``docker exec -d``)."""
    pid = busybox.exec_detached("while [ ! -e /tmp/go ]; do sleep 0.05; done; echo $X > /tmp/done", env={"X": "ran"})
    assert isinstance(pid, int) and pid > 1
    assert busybox.exec(["test", "-d", f"/proc/{pid}"]).ok
    busybox.exec(["touch", "/tmp/go"])
    deadline = time.monotonic() + 30
    while busybox.exec(["cat", "/tmp/done"]).stdout != "ran\n":
        assert time.monotonic() < deadline, "the detached command did not finish"
        time.sleep(0.05)
    pid = busybox.exec_detached(["sleep", "9151"], timeout=0.3)
    deadline = time.monotonic() + 30
    while busybox.exec(["test", "-d", f"/proc/{pid}"]).ok:
        assert time.monotonic() < deadline, "timeout did not end the detached command"
        time.sleep(0.05)
    with pytest.raises(sbx.CommandError) as err:
        busybox.exec_detached(["no-such-command"])
    assert err.value.result.exit_code == 127 and "no-such-command" in err.value.result.stderr


def test_connect_port(busybox: sbx.Sandbox) -> None:
    """``connect_port``: a TCP connection to a server on the sandbox's
    loopback, through the server's tunnel (no published port)."""
    busybox.files.write("/www/index.html", "hello through the tunnel\n")
    busybox.exec_detached(["httpd", "-f", "-p", "127.0.0.1:8081", "-h", "/www"])
    deadline = time.monotonic() + 30
    while "8081" not in busybox.exec(["netstat", "-ltn"]).stdout:
        assert time.monotonic() < deadline, "httpd did not listen"
        time.sleep(0.05)
    with busybox.connect_port(8081) as conn:
        assert isinstance(conn, sbx.PortConnection)
        conn.send(b"GET /index.html HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := conn.receive():
            reply += chunk
            assert len(reply) < 1 << 20
    assert reply.startswith(b"HTTP/1.") and reply.endswith(b"hello through the tunnel\n"), reply[:200]
    with pytest.raises(sbx.BadGatewayError):
        busybox.connect_port(8082)
    with pytest.raises(ValueError):
        busybox.connect_port(0)
