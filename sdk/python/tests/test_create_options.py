"""Create options as docs/python.md documents them: a string ``cmd`` runs
through ``/bin/sh -c``, ``pull`` is passed to the server."""

from __future__ import annotations

import time

import pytest

import sbx
from conftest import Server


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
    # An owner lease: renew() pushes the deadline; once nobody renews, the
    # server removes the sandbox.
    sb = client.sandboxes.create("busybox", lease="2s")
    server.seen.add(sb.id)
    assert sb.record.spec.get("lease") == "2s" and sb.record.expires_at is not None
    first = sb.record.expires_at
    time.sleep(0.5)
    assert sb.renew().expires_at > first
    for _ in range(150):
        try:
            sb.refresh()
        except sbx.NotFoundError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the sandbox whose lease ran out is still there")
    with client.sandboxes.create("busybox") as plain:
        server.seen.add(plain.id)
        with pytest.raises(sbx.ConflictError):
            plain.renew()
    with pytest.raises(ValueError):
        client.sandboxes.create("busybox", lease="a while")


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
