"""The server-level calls of the sync client: events, images, host, and
how errors of the server and of the connection come out."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import pytest

import sbx
from conftest import TOKEN, Server, cleanup, start_server


def test_events_in_order(server: Server, client: sbx.Client) -> None:
    got: list[sbx.Event] = []
    with client.events(timeout=30) as events:
        sb = client.sandboxes.create("busybox", name="sdk-events")
        server.seen.add(sb.id)
        sb.remove()
        for ev in events:
            if ev.sandbox == sb.id:
                got.append(ev)
            if ev.type == "sandbox.removed" and ev.sandbox == sb.id:
                break
    types = [e.type for e in got]
    assert types[0] == "sandbox.created" and "sandbox.ready" in types and types[-1] == "sandbox.removed"
    assert all(b.seq > a.seq for a, b in zip(got, got[1:]))
    assert got[0].name == "sdk-events" and got[0].time is not None
    # Resuming from an event replays what came after it.
    with client.events(since=got[0].seq, timeout=10) as again:
        replay = [next(iter(again)) for _ in range(len(got) - 1)]
    assert [e.seq for e in replay][: len(got) - 1] == [e.seq for e in got[1:]]


def test_egress_events_are_typed(server: Server, client: sbx.Client) -> None:
    # A bridged sandbox that may reach only api.test asks for another
    # name: the egress daemon of sbx serve refuses it, and the event says
    # so in typed fields.
    with client.events(timeout=60) as events:
        with client.sandboxes.create("busybox", network="bridge", egress="api.test") as sb:
            server.seen.add(sb.id)
            assert sb.exec(["nslookup", "other.test"]).exit_code != 0
            for ev in events:
                if ev.type == "sandbox.egress" and ev.sandbox == sb.id and ev.egress and ev.egress.name == "other.test":
                    break
    assert isinstance(ev.egress, sbx.EgressAudit)
    assert (ev.egress.kind, ev.egress.decision) == ("dns", "deny") and ev.egress.reason, ev.egress
    assert ev.egress.bytes_up == 0 and ev.raw["egress"]["name"] == "other.test"


def test_events_timeout_is_a_timeout_error(client: sbx.Client) -> None:
    with pytest.raises(TimeoutError):
        with client.events(timeout=0.5) as events:
            for _ in events:
                pass


def test_events_resume_across_a_server_restart(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="sbxpy-restart-"))
    srv = start_server(base)
    seen: list[sbx.Event] = []
    errors: list[BaseException] = []
    try:
        with sbx.Client(srv.unix, token=TOKEN) as c:
            stream = c.events(reconnect_for=20)

            def follow() -> None:
                try:
                    for ev in stream:
                        seen.append(ev)
                        if ev.type == "sandbox.created" and ev.name == "after-restart":
                            return
                except BaseException as e:  # reported to the test below
                    errors.append(e)

            stream.__enter__()  # connected: the events below are seen
            reader = threading.Thread(target=follow)
            reader.start()
            before = c.sandboxes.create(rootfs=str(srv.busybox), name="before-restart")
            srv.seen.add(before.id)
            before.remove()
            deadline = time.monotonic() + 10
            while not any(e.type == "sandbox.removed" for e in seen) and time.monotonic() < deadline:
                time.sleep(0.05)
            srv.stop()
            srv = start_server(base)
            with sbx.Client(srv.unix, token=TOKEN) as c2:
                deadline = time.monotonic() + 20
                while reader.is_alive() and time.monotonic() < deadline:
                    try:
                        sb = c2.sandboxes.create(rootfs=str(srv.busybox), name="after-restart")
                        srv.seen.add(sb.id)
                        sb.remove()
                    except sbx.APIError:
                        pass
                    reader.join(1)
            reader.join(5)
            stream.close()
        assert not errors, errors
        types = [e.type for e in seen]
        assert types[:3] == ["sandbox.created", "sandbox.ready", "sandbox.removed"], types
        assert "reset" in types[3:], types
        assert any(e.name == "after-restart" for e in seen)
    finally:
        cleanup(srv)


def test_images(server: Server, client: sbx.Client) -> None:
    names = {i.name for i in client.images.list()}
    assert any(n.endswith("busybox:latest") for n in names) and any(n.endswith("python:3.12") for n in names)
    detail = client.images.get("busybox")
    assert detail.digest.startswith("sha256:") and detail.layer_dirs and detail.diff_ids
    imported = client.images.import_archive(server.busybox, name="sdk-imported:1")
    assert imported.name.endswith("sdk-imported:1") and imported.size_bytes > 0
    client.images.remove("sdk-imported:1")
    with pytest.raises(sbx.NotFoundError):
        client.images.get("sdk-imported:1")
    with pytest.raises(sbx.NotFoundError):
        client.images.remove("sdk-imported:1")
    report = client.images.gc()
    assert report.freed_bytes >= 0


def test_prepare(client: sbx.Client) -> None:
    first = client.images.prepare("busybox", "echo prepared > /ready; echo built")
    assert not first.cached and "built" in first.output
    again = client.images.prepare("busybox", "echo prepared > /ready; echo built")
    assert again.cached and again.image.digest == first.image.digest
    with client.sandboxes.create(first.image.name) as sb:
        assert sb.files.read("/ready") == "prepared\n"
    client.images.remove(first.image.name)


def test_pull_of_an_unreachable_registry(client: sbx.Client) -> None:
    # Port 1 of the loopback of the test's own network namespace: refused.
    with pytest.raises(sbx.APIError) as err:
        client.images.pull("127.0.0.1:1/nothing:latest", on_progress=lambda p: None)
    assert err.value.code == "registry_unreachable" and isinstance(err.value, sbx.RegistryUnreachableError)


def test_host_calls(server: Server, client: sbx.Client) -> None:
    health = client.health()
    assert health.status == "ok" and health.version
    info = client.info()
    assert info.root == str(server.root) and info.cgroup_mode in ("v1", "hybrid", "v2")
    assert isinstance(client.gc(), sbx.GCReport)


def test_tcp_and_tokens(server: Server) -> None:
    with sbx.Client(f"http://{server.tcp}", token=TOKEN) as c:
        assert c.health().status == "ok"
        assert isinstance(c.sandboxes.list(), list)
    with sbx.Client(server.tcp, token="wrong-token-0123456789") as c:
        assert c.health().status == "ok"  # needs no token
        with pytest.raises(sbx.UnauthorizedError) as err:
            c.sandboxes.list()
        assert err.value.status == 401 and err.value.code == "unauthorized"
    with sbx.Client(server.unix) as c:  # no token on the socket either
        with pytest.raises(sbx.UnauthorizedError):
            c.images.list()


def test_token_and_host_from_the_environment(server: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SBX_HOST", server.unix)
    monkeypatch.setenv("SBX_TOKEN", TOKEN)
    with sbx.Client() as c:
        c.sandboxes.list()
    monkeypatch.delenv("SBX_TOKEN")
    (tmp_path / "tok").write_text(TOKEN + "\n")
    monkeypatch.setenv("SBX_TOKEN_FILE", str(tmp_path / "tok"))
    with sbx.Client() as c:
        c.sandboxes.list()


def test_connection_errors(tmp_path: Path) -> None:
    with sbx.Client(f"unix://{tmp_path}/none.sock") as c:
        with pytest.raises(ConnectionError) as err:
            c.health()
    assert isinstance(err.value, sbx.ConnectError) and "sbx serve" in str(err.value)
    for bad in ("unix://relative.sock", "ftp://host", "http://host:1/path", ""):
        with pytest.raises(ValueError):
            sbx.Client(bad)


def test_server_errors_are_typed(server: Server, client: sbx.Client) -> None:
    with pytest.raises(sbx.NotFoundError) as missing:
        client.sandboxes.get("no-such-sandbox")
    assert isinstance(missing.value, LookupError) and missing.value.status == 404
    assert "no-such-sandbox" in missing.value.message
    with pytest.raises(sbx.ForbiddenError) as forbidden:
        client.sandboxes.create("busybox", network="host")
    assert forbidden.value.status == 422 and isinstance(forbidden.value, PermissionError)
    with pytest.raises(sbx.ForbiddenError):
        client.sandboxes.create(rootfs="/etc")
    # The pull of a missing image fails inside the test's network namespace.
    with pytest.raises(sbx.APIError, match="registry unreachable"):
        client.sandboxes.create("sdk-never-heard-of:x")


def test_limit_error_carries_retry_after(server: Server) -> None:
    base = Path(tempfile.mkdtemp(prefix="sbxpy-limit-"))
    srv = start_server(base, "--max-sandboxes", "1")
    try:
        with srv.client() as c:
            first = c.sandboxes.create(rootfs=str(srv.busybox))
            srv.seen.add(first.id)
            with pytest.raises(sbx.LimitError) as err:
                c.sandboxes.create(rootfs=str(srv.busybox))
            assert err.value.status == 429 and err.value.retry_after == 1.0
    finally:
        cleanup(srv)


def test_tag_history_save_and_load(client: sbx.Client, tmp_path: Path) -> None:
    tagged = client.images.tag("busybox", "sdk-tagged:2")
    try:
        assert tagged.name.endswith("sdk-tagged:2") and tagged.digest == client.images.get("busybox").digest
        steps = client.images.history("sdk-tagged:2")
        layers = [s.diff_id for s in steps if s.diff_id]
        assert list(reversed(layers)) == client.images.get("busybox").diff_ids
        assert all(isinstance(s, sbx.ImageHistoryStep) and s.size_bytes >= 0 for s in steps)
        archive = tmp_path / "saved.tar"
        client.images.save("sdk-tagged:2", archive)
        assert archive.stat().st_size > 1000
        with pytest.raises(sbx.NotFoundError):
            client.images.save(["sdk-nosuch:1"], tmp_path / "none.tar")
        assert not (tmp_path / "none.tar").exists() and [p.name for p in tmp_path.iterdir()] == ["saved.tar"]
        client.images.remove("sdk-tagged:2")
        loaded = client.images.import_archive(archive)
        assert loaded.name.endswith("sdk-tagged:2")
    finally:
        client.images.remove("sdk-tagged:2")
    with pytest.raises(sbx.NotFoundError):
        client.images.tag("sdk-nosuch:1", "sdk-other:1")


def test_disk_usage_and_prune(client: sbx.Client, server: Server) -> None:
    stopped = client.sandboxes.create("busybox")
    server.seen.add(stopped.id)
    stopped.stop(timeout="1s")
    with client.sandboxes.create("busybox") as running:
        server.seen.add(running.id)
        du = client.disk_usage()
        assert du.sandboxes >= 2 and du.sandboxes_running >= 1 and du.images >= 1 and du.layers_bytes > 0
        report = client.prune()
        assert stopped.id in report.sandboxes and running.id not in report.sandboxes and report.images == []
        assert isinstance(report.layers, sbx.ImageGCReport)
        assert running.exec(["true"]).ok
