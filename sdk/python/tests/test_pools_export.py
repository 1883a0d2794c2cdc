"""Warm pools (client.pools), a sandbox's export and the executor's view
(sb.info), and docker's short image names, against a real server."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

import sbx
from conftest import TOKEN, Server


def test_pool_lifecycle(client: sbx.Client, server: Server) -> None:
    name = "sdk-pool"
    pool = client.pools.create(name, 1, "busybox", hostname="pooled")
    try:
        assert isinstance(pool, sbx.Pool) and pool.name == name and pool.size == 1 and pool.key
        assert pool.options.get("hostname") == "pooled"
        with pytest.raises(sbx.ConflictError):
            client.pools.create(name, 1, "busybox", hostname="pooled")
        fill = client.pools.fill(name)
        assert isinstance(fill, sbx.PoolReport)
        ready = client.pools.get(name).ready
        server.seen.update(ready + fill.started)
        assert len(ready) == 1, ready
        assert name in [p.name for p in client.pools.list()]
        # A create with the pool's key claims the ready member, and gets
        # what it asks for beyond the key applied (memory, labels, hostname).
        with client.sandboxes.create("busybox", hostname="claimed", memory="64m", labels={"claim": "1"}) as sb:
            server.seen.add(sb.id)
            assert sb.id == ready[0] and sb.record.labels == {"claim": "1"}
            assert sb.record.from_pool == name and sb.record.pool == "hit, " + name
            assert sb.exec(["hostname"]).stdout.strip() == "claimed"
        # One the pool cannot serve says why.
        with client.sandboxes.create("busybox", readonly_rootfs=True) as cold:
            server.seen.add(cold.id)
            assert cold.record.from_pool == "" and cold.record.pool == f"miss, pool {name}: readonly_rootfs differs"
        client.pools.fill(name)
        idle = client.pools.get(name).ready
        server.seen.update(idle)
        drained = client.pools.drain(name)
        assert sorted(drained.removed) == sorted(idle) and drained.started == []
        for member in idle:
            with pytest.raises(sbx.NotFoundError):
                client.sandboxes.get(member)
    finally:
        removed = client.pools.remove(name)
        server.seen.update(removed.removed)
    with pytest.raises(sbx.NotFoundError):
        client.pools.get(name)
    with pytest.raises(sbx.NotFoundError):
        client.pools.fill(name)
    with pytest.raises(sbx.InvalidError):
        client.pools.create("../bad", 1, "busybox")
    with pytest.raises(ValueError):
        client.pools.create("sdk-neg", -1, "busybox")
    assert "../bad" not in [p.name for p in client.pools.list()]


def test_pool_booted_command(client: sbx.Client, server: Server) -> None:
    """A pool whose members boot a main command: each member has a key of
    its own in the key_env variable and is ready once the ready check
    answers; a create asking for the same command claims it running. The
    user its command runs as is part of such a pool's key: a create asking
    for another starts cold and says why."""
    name = "sdk-boot"
    cmd = ["sh", "-c", 'mkdir -p /tmp/w && echo ok > /tmp/w/health && printf %s "$MEMBER_KEY" > /tmp/key && exec httpd -f -p 8080 -h /tmp/w']
    client.pools.create(
        name, 1, "busybox", cmd=cmd, key_env=["MEMBER_KEY"], ready_check={"port": 8080, "path": "/health", "body": "ok", "timeout": 60}
    )
    try:
        fill = client.pools.fill(name)
        server.seen.update(fill.started)
        assert len(fill.started) == 1
        with client.sandboxes.create("busybox", cmd=cmd) as sb:
            server.seen.add(sb.id)
            assert sb.record.from_pool == name and sb.record.pool == "hit, " + name
            key = sb.exec(["cat", "/tmp/key"]).stdout
            assert len(key) == 64 and all(c in "0123456789abcdef" for c in key)
            assert sb.exec(["wget", "-qO-", "http://127.0.0.1:8080/health"]).stdout == "ok\n"
        client.pools.fill(name)
        server.seen.update(client.pools.get(name).ready)
        with client.sandboxes.create("busybox", cmd=cmd, user="1000:1000") as cold:
            server.seen.add(cold.id)
            assert cold.record.from_pool == "" and "user" in cold.record.pool
    finally:
        removed = client.pools.remove(name)
        server.seen.update(removed.removed)


def test_export(client: sbx.Client, busybox: sbx.Sandbox, tmp_path: Path) -> None:
    busybox.files.write("/root/exported.txt", "from the sandbox\n")
    dest = tmp_path / "root.tar"
    busybox.export(dest)
    with tarfile.open(dest) as tar:
        names = {m.name.lstrip("./") for m in tar.getmembers()}
        member = tar.extractfile("root/exported.txt") or tar.extractfile("./root/exported.txt")
        assert member is not None and member.read() == b"from the sandbox\n"
    assert "bin/busybox" in names and not any(n.startswith(".sbx") for n in names), sorted(names)[:20]
    assert busybox.refresh().status == "running"  # paused for the export only
    buf = io.BytesIO()
    busybox.export(buf)
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tar:
        assert {m.name.lstrip("./") for m in tar.getmembers()} == names
    gone = sbx.Sandbox(busybox._http, sbx.SandboxRecord.from_json({"id": "sdk-no-such-sandbox"}))
    with pytest.raises(sbx.NotFoundError):
        gone.export(tmp_path / "none.tar")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root.tar"]


def test_executor_info(client: sbx.Client, server: Server) -> None:
    with client.sandboxes.create("busybox", memory="96m", pids=64) as sb:
        server.seen.add(sb.id)
        info = sb.info()
        assert isinstance(info, sbx.ExecutorInfo)
        assert info.memory.get("limit_bytes") == 96 << 20, info.raw
        assert info.pids.get("limit", 0) >= 64 and info.cpu.get("count", 0) >= 1, info.raw


def test_familiar_names(client: sbx.Client, server: Server) -> None:
    loaded = client.images.import_archive(server.busybox, name="sdk-local")
    try:
        assert loaded.name == "index.docker.io/library/sdk-local:latest"
        assert loaded.familiar_name == "sdk-local:latest"
        assert "sdk-local:latest" in [i.familiar_name for i in client.images.list()]
        assert client.images.get("sdk-local").familiar_name == "sdk-local:latest"
    finally:
        client.images.remove("sdk-local")
    assert sbx.Image.from_json({"name": "index.docker.io/me/app:1", "digest": "d"}).familiar_name == "me/app:1"
    assert sbx.Image.from_json({"name": "127.0.0.1:5000/app:1", "digest": "d"}).familiar_name == "127.0.0.1:5000/app:1"


@pytest.mark.anyio
async def test_export_and_pools_async(server: Server, tmp_path: Path) -> None:
    async with sbx.AsyncClient(server.unix, token=TOKEN) as c:
        assert isinstance(await c.pools.list(), list)
        async with await c.sandboxes.create("busybox") as sb:
            server.seen.add(sb.id)
            await sb.export(tmp_path / "a.tar")
            with tarfile.open(tmp_path / "a.tar") as tar:
                assert any(m.name.lstrip("./") == "bin/busybox" for m in tar.getmembers())
