"""The async client against a real sbx serve: the same calls as coroutines,
concurrency, and cancellation that kills what it cancels."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

import sbx
from conftest import TOKEN, Server

pytestmark = pytest.mark.anyio


async def running(sb: sbx.AsyncSandbox, pattern: str) -> bool:
    """Whether a process of the sandbox has pattern in its command line."""
    out = (await sb.exec(["ps", "-o", "args"])).stdout
    return any(pattern in line and "ps -o" not in line for line in out.splitlines())


async def gone(sb: sbx.AsyncSandbox, pattern: str, timeout: float = 10.0) -> bool:
    """Wait, bounded, until no process matches pattern."""
    deadline = time.monotonic() + timeout
    while await running(sb, pattern):
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.05)
    return True


async def test_the_example_async(server: Server, tmp_path: Path) -> None:
    async with sbx.AsyncClient(server.unix, token=TOKEN) as c:
        async with c.events() as events:
            async with await c.sandboxes.create(
                "python:3.12", memory="512m", cpus=1, network="bridge", ttl="1h"
            ) as sb:
                server.seen.add(sb.id)
                r = await sb.exec(["python3", "-c", "print(6*7)"], timeout=10)
                assert (r.stdout, r.exit_code, r.report.status) == ("42\n", 0, "ok")
                chunks = [c.data async for c in sb.exec_stream(["sh", "-c", "echo a; echo b >&2"])]
                assert sorted(chunks) == ["a\n", "b\n"]
                async with await sb.session() as sh:
                    await sh.run("cd /tmp && export X=1")
                    assert (await sh.run("echo $X; pwd")).output == "1\n/tmp\n"
                await sb.files.write("/src/a.py", "print('hi')\n")
                assert await sb.files.read("/src/a.py") == "print('hi')\n"
                (tmp_path / "up.txt").write_text("up\n")
                await sb.files.upload(tmp_path / "up.txt", "/src")
                got = await sb.files.download("/src", tmp_path)
                assert sorted(p.name for p in got.iterdir()) == ["a.py", "up.txt"]
            kinds = []
            async for ev in events:
                if ev.sandbox == sb.id:
                    kinds.append(ev.type)
                if ev.type == "sandbox.removed" and ev.sandbox == sb.id:
                    break
            assert kinds[0] == "sandbox.created" and kinds[-1] == "sandbox.removed"


async def test_errors_and_timeouts(server: Server) -> None:
    async with sbx.AsyncClient(server.unix, token=TOKEN) as c:
        with pytest.raises(sbx.NotFoundError):
            await c.sandboxes.get("no-such-sandbox")
        async with await c.sandboxes.create("busybox") as sb:
            server.seen.add(sb.id)
            with pytest.raises(sbx.CommandTimeoutError) as err:
                await sb.exec(["sh", "-c", "echo x; sleep 9120"], timeout=0.3)
            assert err.value.result.stdout == "x\n"
            with pytest.raises(sbx.CommandError):
                await sb.exec("exit 3", check=True)
            with pytest.raises(FileNotFoundError):
                await sb.files.read("/nope")
            assert await gone(sb, "sleep 9120")
        with pytest.raises(TimeoutError):
            async with c.events(timeout=0.3) as events:
                async for _ in events:
                    pass


async def test_concurrent_execs(server: Server) -> None:
    async with sbx.AsyncClient(server.unix, token=TOKEN) as c:
        async with await c.sandboxes.create("busybox") as sb:
            server.seen.add(sb.id)
            results: dict[int, str] = {}

            async def one(i: int) -> None:
                results[i] = (await sb.exec(["sh", "-c", f"sleep 0.3; echo {i}"])).stdout

            start = time.monotonic()
            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(one, i)
            assert results == {i: f"{i}\n" for i in range(8)}
            # Eight 0.3 s commands ran side by side, not one after another.
            assert time.monotonic() - start < 8 * 0.3


async def test_cancellation_kills_the_command(server: Server) -> None:
    async with sbx.AsyncClient(server.unix, token=TOKEN) as c:
        async with await c.sandboxes.create("busybox") as sb:
            server.seen.add(sb.id)
            with anyio.move_on_after(0.5) as scope:
                await sb.exec(["sleep", "9121"])
            assert scope.cancelled_caught
            assert await gone(sb, "sleep 9121"), "the cancelled exec's command still runs"

            with anyio.move_on_after(0.5):
                async for _ in sb.exec_stream(["sh", "-c", "echo go; exec sleep 9122"]):
                    pass
            assert await gone(sb, "sleep 9122"), "the cancelled stream's command still runs"

            # A cancelled session call leaves the command running (OpenHands
            # semantics: timeouts never kill); interrupt stops it.
            async with await sb.session() as sh:
                with anyio.move_on_after(0.5):
                    await sh.run("sleep 9123")
                assert await running(sb, "sleep 9123")
                await sh.interrupt(timeout=5)
                assert await gone(sb, "sleep 9123")
            # The sandbox still serves after all of it.
            assert (await sb.exec(["echo", "ok"])).stdout == "ok\n"


async def test_exec_detached_and_connect_port_async(server: Server) -> None:
    async with sbx.AsyncClient(server.unix, token=TOKEN) as c:
        async with await c.sandboxes.create("busybox") as sb:
            server.seen.add(sb.id)
            await sb.files.write("/www/index.html", "async tunnel\n")
            pid = await sb.exec_detached(["httpd", "-f", "-p", "127.0.0.1:8083", "-h", "/www"])
            assert pid > 1
            deadline = time.monotonic() + 30
            while "8083" not in (await sb.exec(["netstat", "-ltn"])).stdout:
                assert time.monotonic() < deadline, "httpd did not listen"
                await anyio.sleep(0.05)
            async with await sb.connect_port(8083) as conn:
                await conn.send(b"GET /index.html HTTP/1.0\r\n\r\n")
                reply = b""
                while chunk := await conn.receive():
                    reply += chunk
            assert reply.endswith(b"async tunnel\n"), reply[:200]
