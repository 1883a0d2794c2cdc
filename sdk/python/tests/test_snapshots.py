"""Checkpoint, restore and fork (sb.checkpoint, client.sandboxes.restore,
sb.fork, sb.stop(checkpoint=True)) against a real server with CRIU."""

from __future__ import annotations

import pytest

import sbx
from conftest import Server


@pytest.mark.xfail(
    strict=False,
    reason="known bug: a checkpoint through sbx serve fails about one time in three "
    "(CRIU: 'unix socket not found', a connection into the executor still open at dump)",
)
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
