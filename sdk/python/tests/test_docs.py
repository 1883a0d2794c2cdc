"""The examples of docs/python.md run as they are written,
against the test server (only the socket path is the test server's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sbx
from conftest import REPO, TOKEN, Server

MARKER = "<!-- the SDK's tests run this block"
DEFAULT_SOCKET = "unix:///run/sbx/sbx.sock"


def examples(doc: Path) -> list[str]:
    """The python blocks of doc that follow the marker comment."""
    text = doc.read_text()
    blocks = re.findall(re.escape(MARKER) + r"[^\n]*\n```python\n(.*?)```", text, re.S)
    assert blocks, f"{doc} has no tested example"
    return blocks


@pytest.mark.parametrize(
    "doc, index",
    [("docs/python.md", 0), ("docs/python.md", 1)],
)
def test_example_runs(server: Server, client: sbx.Client, doc: str, index: int) -> None:
    code = examples(REPO / doc)[index]
    assert DEFAULT_SOCKET in code
    code = code.replace(DEFAULT_SOCKET, server.unix)
    before = {s.id for s in client.sandboxes.list()}
    env = {**os.environ, "SBX_TOKEN": TOKEN, "PYTHONPATH": str(REPO / "sdk" / "python" / "src")}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"{doc} example failed:\n{res.stdout}\n{res.stderr}"
    assert "42" in res.stdout
    if index == 0:
        assert "sandbox.removed" in res.stdout
    assert "1\n" in res.stdout
    # The example cleaned up after itself.
    assert {s.id for s in client.sandboxes.list()} == before
