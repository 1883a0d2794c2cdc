"""Images built on the server from a local context (images.build), sync
and async, against a real sbx serve."""

from __future__ import annotations

from pathlib import Path

import pytest

import sbx
from conftest import TOKEN, Server

DOCKERFILE = """FROM busybox
ARG WHO
COPY app/ /app/
RUN echo "built for $WHO" && cat /app/* > /all
CMD ["cat", "/all"]
"""


def context(tmp_path: Path, files: dict[str, str]) -> Path:
    """A context directory holding files (path -> content)."""
    ctx = tmp_path / "ctx"
    for name, text in files.items():
        (ctx / name).parent.mkdir(parents=True, exist_ok=True)
        (ctx / name).write_text(text)
    return ctx


def test_build_run_and_rebuild_from_the_cache(server: Server, client: sbx.Client, tmp_path: Path) -> None:
    ctx = context(
        tmp_path,
        {"Dockerfile": DOCKERFILE, "app/a": "a\n", "app/secret": "s\n", ".dockerignore": "app/secret\n"},
    )
    output: list[str] = []
    first = client.images.build(
        ctx, tag="sdk-built:1", build_args={"WHO": "sync"}, pull="never", on_output=output.append
    )
    text = "".join(output)
    assert "built for sync" in text and "RUN" in text, text
    assert first.image.name.endswith("sdk-built:1") and first.steps == 5 and first.cached == 0, first
    detail = client.images.get("sdk-built:1")
    assert detail.digest == first.image.digest
    cmd = detail.config.get("cmd") or detail.config.get("Cmd")
    assert cmd == ["cat", "/all"], detail.config
    with client.sandboxes.create("sdk-built:1") as sb:
        server.seen.add(sb.id)
        # The image's CMD prints what COPY brought: app/secret was never sent.
        res = sb.exec(cmd)
        assert res.exit_code == 0 and res.stdout == "a\n", res
        assert sb.exec(["test", "-e", "/app/secret"]).exit_code != 0
    again = client.images.build(ctx, tag="sdk-built:1", build_args={"WHO": "sync"}, pull="never")
    assert again.cached > 0 and again.steps == first.steps and again.image.digest == first.image.digest, again
    client.images.remove("sdk-built:1")


def test_an_ignored_file_is_not_sent(client: sbx.Client, tmp_path: Path) -> None:
    ctx = context(
        tmp_path,
        {"Dockerfile": "FROM busybox\nCOPY secret.txt /secret.txt\n", "secret.txt": "s\n", ".dockerignore": "*.txt\n"},
    )
    with pytest.raises(sbx.APIError, match="secret.txt") as err:
        client.images.build(ctx, pull="never")
    assert "line 2" in str(err.value), err.value


def test_a_bad_dockerfile_raises_invalid_with_its_line(client: sbx.Client, tmp_path: Path) -> None:
    ctx = context(tmp_path, {"build/app.Dockerfile": "FROM busybox\nRUN true\nNOSUCH thing\n"})
    with pytest.raises(sbx.InvalidError, match="line 3") as err:
        client.images.build(ctx, dockerfile="build/app.Dockerfile", pull="never")
    assert err.value.code == "invalid"


def test_bad_arguments_are_refused_before_sending(client: sbx.Client, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="inside the context"):
        client.images.build(tmp_path, dockerfile="../Dockerfile")
    with pytest.raises(NotADirectoryError):
        client.images.build(tmp_path / "missing")


@pytest.mark.anyio
async def test_build_async(server: Server, tmp_path: Path) -> None:
    ctx = context(tmp_path, {"Dockerfile": DOCKERFILE, "app/a": "async\n"})
    output: list[str] = []
    async with sbx.AsyncClient(server.unix, token=TOKEN) as c:
        res = await c.images.build(
            ctx, tag="sdk-built-async:1", build_args={"WHO": "async"}, pull="never", on_output=output.append
        )
        assert "built for async" in "".join(output)
        assert res.image.name.endswith("sdk-built-async:1") and res.steps == 5, res
        async with await c.sandboxes.create("sdk-built-async:1") as sb:
            server.seen.add(sb.id)
            assert (await sb.exec(["cat", "/all"])).stdout == "async\n"
        await c.images.remove("sdk-built-async:1")


SECRET = "sdk-s3cr3t-9a2e"


def test_secrets_reach_only_their_steps_and_prune_empties_the_cache(
    server: Server, client: sbx.Client, tmp_path: Path
) -> None:
    ctx = context(
        tmp_path,
        {
            "Dockerfile": "FROM busybox\n"
            "RUN --mount=type=secret,id=tok,required grep -qx 'sdk-s3.r3t-9a2e' /run/secrets/tok && echo used > /used\n"
            "RUN --mount=type=secret,id=bin,env=BIN test \"$BIN\" = 'x y' && echo env > /env\n"
        },
    )
    first = client.images.build(ctx, tag="sdk-secret:1", pull="never", secrets={"tok": SECRET, "bin": b"x y"})
    assert first.cached == 0, first
    with client.sandboxes.create("sdk-secret:1") as sb:
        server.seen.add(sb.id)
        res = sb.exec("cat /used /env; test ! -e /run/secrets/tok && echo absent")
        assert res.stdout == "used\nenv\nabsent\n", res
    history = client.images.history("sdk-secret:1")
    assert all(SECRET not in (step.created_by or "") for step in history), history
    # Another value: nothing built again (the value is in no cache key).
    again = client.images.build(ctx, tag="sdk-secret:1", pull="never", secrets={"tok": "sdk-s3Xr3t-9a2e", "bin": "x y"})
    assert again.cached == again.steps - 1, again
    with pytest.raises(sbx.APIError, match="--secret id=tok"):
        client.images.build(ctx, pull="never", no_cache=True)
    with pytest.raises(ValueError, match="more than"):
        client.images.build(ctx, pull="never", secrets={"tok": b"x" * ((1 << 20) + 1)})
    report = client.images.prune_build_cache()
    assert report.images >= 2 and report.layers is not None, report  # the server is shared: other builds too
    rebuilt = client.images.build(ctx, tag="sdk-secret:2", pull="never", secrets={"tok": SECRET, "bin": "x y"})
    assert rebuilt.cached == 0, rebuilt
    client.images.remove("sdk-secret:1")
    client.images.remove("sdk-secret:2")
