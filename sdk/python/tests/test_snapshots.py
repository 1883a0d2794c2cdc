"""Checkpoint, restore and fork (sb.checkpoint, client.sandboxes.restore,
sb.fork, sb.stop(checkpoint=True)) and the snapshot store (client.snapshots:
list, get, remove, export, import_archive) against a real server with CRIU."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path
from typing import Iterator

import pytest

import sbx
from conftest import TOKEN, Server


@pytest.fixture
def busybox(server: Server, client: sbx.Client) -> Iterator[sbx.Sandbox]:
    """A fresh busybox sandbox in the host's user namespace (checkpoints
    need it), removed after the test."""
    with client.sandboxes.create("busybox", userns="host", labels={"test": "sdk"}) as sb:
        server.seen.add(sb.id)
        yield sb


def test_private_userns_refuses_checkpoints(client: sbx.Client, server: Server) -> None:
    with client.sandboxes.create("busybox") as sb:
        server.seen.add(sb.id)
        assert sb.record.spec.get("userns") == "private"
        for call in (
            lambda: sb.checkpoint("sdk-private", leave_running=True),
            lambda: sb.fork(1),
            lambda: sb.stop(checkpoint=True),
        ):
            with pytest.raises(sbx.SbxError, match="--userns host"):
                call()
            assert sb.refresh().status == "running"
        with pytest.raises(sbx.SbxError, match="--userns host"):
            client.sandboxes.create("busybox", idle_timeout="1m")
    assert "sdk-private" not in _names(client)
    with pytest.raises(ValueError):
        client.sandboxes.create("busybox", userns="shared")


def test_checkpoint_restore_fork(client: sbx.Client, server: Server, busybox: sbx.Sandbox) -> None:
    busybox.exec(["sh", "-c", "echo kept > /root/f"])
    snap = busybox.checkpoint("sdk-snap", leave_running=True)
    try:
        assert isinstance(snap, sbx.Snapshot) and snap.name == "sdk-snap" and snap.bytes > 0
        assert snap.source_id == busybox.id and busybox.record.status == "running"
        with client.sandboxes.restore("sdk-snap", name="sdk-restored") as restored:
            server.seen.add(restored.id)
            assert restored.id != busybox.id and restored.record.name == "sdk-restored"
            assert restored.exec(["cat", "/root/f"]).stdout == "kept\n"
        copies = busybox.fork(2)
        try:
            assert len(copies) == 2 and len({c.id for c in copies} | {busybox.id}) == 3
            for i, c in enumerate(copies):
                server.seen.add(c.id)
                c.exec(["sh", "-c", f"echo copy{i} > /root/f"])
            assert [c.exec(["cat", "/root/f"]).stdout for c in copies] == ["copy0\n", "copy1\n"]
            assert busybox.exec(["cat", "/root/f"]).stdout == "kept\n"
        finally:
            for c in copies:
                c.remove(force=True)
        rec = busybox.stop(checkpoint=True)
        assert rec.status == "stopped"
        busybox.start()
        assert busybox.exec(["cat", "/root/f"]).stdout == "kept\n"
    finally:
        res = server.sbx("snapshot", "rm", "sdk-snap")
        assert res.returncode == 0, res.stderr


def _names(client: sbx.Client) -> list[str]:
    return [s.name for s in client.snapshots.list()]


def test_snapshot_store(client: sbx.Client, server: Server, busybox: sbx.Sandbox, tmp_path: Path) -> None:
    busybox.exec(["sh", "-c", "echo stored > /root/f"])
    busybox.checkpoint("sdk-store", leave_running=True)
    try:
        assert "sdk-store" in _names(client)
        full = client.snapshots.get("sdk-store")
        assert full.name == "sdk-store" and full.source_id == busybox.id and full.format >= 1
        assert full.hostname and full.spec and full.bytes > 0 and full.criu_version
        assert full.files and all(d.startswith("sha256:") for d in full.files.values()), full.files
        dest = tmp_path / "store.snap"
        client.snapshots.export("sdk-store", dest)
        assert dest.stat().st_mode & 0o777 == 0o600
        with tarfile.open(dest) as tar:
            assert "snapshot.json" in [m.name.lstrip("./") for m in tar.getmembers()]
        # Its own name is taken; under another it is a second snapshot
        # with the same files.
        with pytest.raises(sbx.ConflictError):
            client.snapshots.import_archive(dest)
        imported = client.snapshots.import_archive(dest, name="sdk-imported")
        assert imported.name == "sdk-imported" and imported.files == full.files
        # A truncated archive is refused and leaves nothing.
        data = dest.read_bytes()
        with pytest.raises(sbx.InvalidError):
            client.snapshots.import_archive(data[: len(data) // 2], name="sdk-truncated")
        assert "sdk-truncated" not in _names(client)
        client.snapshots.remove("sdk-store")
        with pytest.raises(sbx.NotFoundError):
            client.snapshots.get("sdk-store")
        with pytest.raises(sbx.NotFoundError):
            client.snapshots.export("sdk-store", tmp_path / "gone.snap")
        with pytest.raises(sbx.NotFoundError):
            client.snapshots.remove("sdk-store")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["store.snap"]
        with client.sandboxes.restore("sdk-imported") as restored:
            server.seen.add(restored.id)
            assert restored.exec(["cat", "/root/f"]).stdout == "stored\n"
    finally:
        for name in ("sdk-store", "sdk-imported"):
            if name in _names(client):
                client.snapshots.remove(name)
    assert not {"sdk-store", "sdk-imported"} & set(_names(client))
    with pytest.raises(ValueError):
        client.snapshots.get("")


@pytest.mark.anyio
async def test_snapshot_store_async(server: Server, busybox: sbx.Sandbox) -> None:
    async with sbx.AsyncClient(server.unix, token=TOKEN) as c:
        sb = await c.sandboxes.get(busybox.id)
        snap = await sb.checkpoint("sdk-async", leave_running=True)
        try:
            assert snap.name in [s.name for s in await c.snapshots.list()]
            assert (await c.snapshots.get("sdk-async")).files == snap.files
            buf = io.BytesIO()
            await c.snapshots.export("sdk-async", buf)
            copy = await c.snapshots.import_archive(buf.getvalue(), name="sdk-async-copy")
            assert copy.name == "sdk-async-copy" and copy.source_id == busybox.id
            await c.snapshots.remove("sdk-async-copy")
        finally:
            await c.snapshots.remove("sdk-async")
        assert not {"sdk-async", "sdk-async-copy"} & {s.name for s in await c.snapshots.list()}


def test_idle_timeout(client: sbx.Client, server: Server) -> None:
    with client.sandboxes.create("busybox", userns="host", idle_timeout="2s") as sb:
        server.seen.add(sb.id)
        assert sb.record.spec.get("idle_timeout") == "2s" and not sb.record.idle
        sb.exec(["sh", "-c", "echo before > /root/f"])
        deadline = time.monotonic() + 30
        while not sb.refresh().idle:
            assert time.monotonic() < deadline, f"not checkpointed for idleness: {sb.record}"
            time.sleep(0.2)
        assert sb.record.status == "stopped" and sb.record.checkpoint
        # The next call restores it first.
        assert sb.exec(["cat", "/root/f"]).stdout == "before\n"
        assert sb.refresh().status == "running" and not sb.record.idle
    with pytest.raises(sbx.InvalidError):
        client.sandboxes.create("busybox", userns="host", idle_timeout="1m", network="bridge", publish=["18081:80"])
    with pytest.raises(ValueError):
        client.sandboxes.create("busybox", idle_timeout="a while")
