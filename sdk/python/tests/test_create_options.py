"""Create options as docs/python.md documents them: a string ``cmd`` runs
through ``/bin/sh -c``, ``pull`` is passed to the server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sbx
from conftest import TOKEN, Server


def test_string_cmd_runs_through_the_shell(client: sbx.Client, server: Server) -> None:
    with client.sandboxes.create("busybox", cmd="for i in 1 2; do echo n$i; done; exit 6") as sb:
        server.seen.add(sb.id)
        exit = sb.wait()
        assert exit.exit_code == 6, exit
        assert sb.logs().stdout == "n1\nn2\n"


def test_pull_policy(client: sbx.Client, server: Server) -> None:
    # The image is in the server's cache: never pulls nothing and works.
    with client.sandboxes.create("busybox", pull="never") as sb:
        server.seen.add(sb.id)
        assert sb.exec(["true"]).exit_code == 0
    # Not in the cache: never refuses at once instead of trying a registry.
    with pytest.raises(sbx.APIError) as err:
        client.sandboxes.create("sbx-test/not-cached:1", pull="never")
    assert err.value.status in (404, 422), err.value
    with pytest.raises(ValueError):
        client.sandboxes.create("busybox", pull="sometimes")


def test_volume_forms() -> None:
    from sbx._wire import _volume

    assert _volume("/a:/b") == {"host_path": "/a", "path": "/b"}
    assert _volume("/a:/b:ro,idmap=host") == {"host_path": "/a", "path": "/b", "read_only": True, "idmap": "host"}
    assert _volume(sbx.Volume("/a", "/b", idmap="host")) == {"host_path": "/a", "path": "/b", "idmap": "host"}
    for bad in ("/a:/b:rx", "/a:/b:ro,rw", "/a:/b:idmap=sandbox", "/a:/b:ro,ro", "/a"):
        with pytest.raises(ValueError):
            _volume(bad)
    with pytest.raises(ValueError):
        _volume(sbx.Volume("/a", "/b", idmap="sandbox"))


def test_sizes_go_by_their_wire_names() -> None:
    from sbx._wire import create_body

    body = create_body({"image": "busybox", "memory": "64m", "disk": 1 << 20, "tmpfs": ["/t:1m", sbx.Tmpfs("/u")]})
    assert body["limits"] == {"memory_bytes": 64 << 20, "disk_bytes": 1 << 20}
    assert body["tmpfs"] == [{"path": "/t", "size_bytes": 1 << 20}, {"path": "/u"}]


def test_lease(client: sbx.Client, server: Server) -> None:
    # An owner lease: renew() pushes the deadline; once nobody renews (the
    # client that created it, which renews it, is closed), the server
    # removes the sandbox.
    with server.client() as owner:
        sb = owner.sandboxes.create("busybox", lease="2s")
        server.seen.add(sb.id)
        assert sb.record.spec.get("lease") == "2s" and sb.record.expires_at is not None
        first = sb.record.expires_at
        time.sleep(0.5)
        assert sb.renew().expires_at > first
    assert _gone(client, sb.id, 15), "the sandbox whose lease ran out is still there"
    with client.sandboxes.create("busybox", lease=None) as plain:
        server.seen.add(plain.id)
        assert "lease" not in plain.record.spec and plain.record.expires_at is None
        with pytest.raises(sbx.ConflictError):
            plain.renew()
    for bad in ("a while", "500ms", 0):
        with pytest.raises(ValueError):
            client.sandboxes.create("busybox", lease=bad)
    with pytest.raises(ValueError):
        server.client(lease="0s")


def _gone(client: sbx.Client, sandbox_id: str, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            client.sandboxes.get(sandbox_id)
        except sbx.NotFoundError:
            return True
        time.sleep(0.1)
    return False


def test_default_lease_is_kept_while_the_client_lives(server: Server) -> None:
    # A client gives the sandboxes it creates a lease (5 minutes unless it
    # is told otherwise) and renews it while it lives: a sandbox outlives
    # its lease many times over; closing the client stops the renewals and
    # the server removes the sandbox a lease later.
    with server.client() as c:
        sb = c.sandboxes.create("busybox")
        server.seen.add(sb.id)
        assert sb.record.spec.get("lease") == "5m0s", sb.record.spec
        sb.remove()
        assert c._http.leases.kept() == []
    with server.client(lease="2s") as c:
        sb = c.sandboxes.create("busybox")
        server.seen.add(sb.id)
        assert sb.record.spec.get("lease") == "2s"
        time.sleep(5)  # two and a half leases
        assert sb.refresh().status == "running"
        aside = c.sandboxes.create("busybox", lease=None)
        server.seen.add(aside.id)
    with server.client() as other:
        assert _gone(other, sb.id, 15), "the sandbox of a closed client is still there"
        assert other.sandboxes.get(aside.id).status == "running"
        other.sandboxes.get(aside.id).remove()


def test_a_crashed_program_leaves_nothing_running(server: Server) -> None:
    # A program that creates a sandbox with the default client and is
    # killed (kill -9: no close, no atexit) leaves nothing running: its
    # renewals stop with it and the server removes the sandbox.
    program = (
        "import sys, time, sbx\n"
        f"c = sbx.Client({server.unix!r}, token={TOKEN!r}, lease='2s')\n"
        "sb = c.sandboxes.create('busybox')\n"
        "print(sb.id, flush=True)\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(sbx.__file__).resolve().parent.parent)}
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        sandbox_id = proc.stdout.readline().strip()
        assert sandbox_id, "the program printed no sandbox id"
        server.seen.add(sandbox_id)
        time.sleep(4)  # renewed while the program lives
        with server.client() as c:
            assert c.sandboxes.get(sandbox_id).status == "running"
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    with server.client() as c:
        assert _gone(c, sandbox_id, 15), "the sandbox of a killed program is still there"


def test_secret_forms() -> None:
    from sbx._wire import create_body

    body = create_body({"image": "x", "network": "bridge", "egress_policy": "allow: [api.test]",
                        "secrets": [{"name": "K", "hosts": ["api.test"], "prefix": "sk-", "value": "v"}]})
    assert body["egress_policy"] == "allow: [api.test]"
    assert body["secrets"] == [{"name": "K", "value": "v", "hosts": ["api.test"], "prefix": "sk-"}]
    with pytest.raises(TypeError):
        create_body({"image": "x", "secrets": [{"name": "K", "hosts": "api.test", "value": "v"}]})
    with pytest.raises(ValueError):
        create_body({"image": "x", "secrets": [{"name": "K", "value": "v", "host": ["api.test"]}]})


def test_disk_backing(client: sbx.Client, server: Server) -> None:
    """``disk_backing="disk"``: the writable layer on the server's disk, so a
    sandbox writes more than its memory limit."""
    with client.sandboxes.create("busybox", memory="32m", disk_backing="disk") as sb:
        server.seen.add(sb.id)
        assert sb.record.spec.get("disk_backing") == "disk"
        assert sb.exec(["dd", "if=/dev/zero", "of=/big", "bs=1M", "count=48"]).exit_code == 0
    with pytest.raises(ValueError):
        client.sandboxes.create("busybox", disk_backing="ssd")


def test_docker_run_flags_go_by_their_wire_names() -> None:
    from sbx._wire import create_body

    body = create_body(
        {
            "image": "busybox",
            "publish_all": True,
            "extra_hosts": ["db:10.1.2.3"],
            "ulimits": ["nofile=512:1024", {"name": "nproc", "soft": 64}],
            "shm_size": "8m",
        }
    )
    assert body["publish_all"] is True
    assert body["extra_hosts"] == ["db:10.1.2.3"]
    assert body["ulimits"] == [{"name": "nofile", "soft": 512, "hard": 1024}, {"name": "nproc", "soft": 64, "hard": 64}]
    assert body["shm_size_bytes"] == 8 << 20
    assert "publish_all" not in create_body({"image": "busybox", "publish_all": False})
    for bad in ("nofile", "nofile=a", "=1"):
        with pytest.raises(ValueError):
            create_body({"image": "busybox", "ulimits": [bad]})
    with pytest.raises(TypeError):
        create_body({"image": "busybox", "extra_hosts": "db:10.1.2.3"})


def test_docker_run_flags_reach_the_sandbox(client: sbx.Client, server: Server) -> None:
    # ulimits in a private user namespace need CAP_SYS_RESOURCE, which the
    # development hosts lack: the host's user namespace, explicitly.
    with client.sandboxes.create(
        "busybox", userns="host", extra_hosts=["db:10.1.2.3"], ulimits=["nofile=512:1024"], shm_size="8m"
    ) as sb:
        server.seen.add(sb.id)
        res = sb.exec(["sh", "-c", "grep -w db /etc/hosts; ulimit -n; ulimit -Hn; grep -o 'shm tmpfs.*size=[0-9]*k' /proc/mounts | grep -o 'size=[0-9]*k'"])
        assert res.stdout == "10.1.2.3\tdb\n512\n1024\nsize=8192k\n", res
    with pytest.raises(sbx.InvalidError):
        client.sandboxes.create("busybox", ulimits=["nofiles=1"])
