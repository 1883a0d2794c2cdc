"""Generate the sync client (src/sbx/_sync/) from the async one
(src/sbx/_async/) with unasync, as httpcore does: one hand-written client,
its sync twin made by the machine.

    python scripts/gen_sync.py           # write src/sbx/_sync/
    python scripts/gen_sync.py --check   # fail if src/sbx/_sync/ is stale
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import tempfile
from pathlib import Path

import unasync

SRC = Path(__file__).resolve().parent.parent / "src" / "sbx"

# Names of the async client and of the libraries it uses, and their sync
# twins; unasync already handles async/await, __aenter__ and the typing
# names.
RENAMES = {
    "AsyncClient": "Client",
    "AsyncSandboxes": "Sandboxes",
    "AsyncSandbox": "Sandbox",
    "AsyncImages": "Images",
    "AsyncPools": "Pools",
    "AsyncSnapshots": "Snapshots",
    "AsyncVolumes": "Volumes",
    "AsyncFiles": "Files",
    "AsyncSession": "Session",
    "AsyncExecStream": "ExecStream",
    "AsyncPortConnection": "PortConnection",
    "AsyncEventStream": "EventStream",
    "AsyncHTTP": "HTTP",
    "AsyncClosing": "Closing",
    "AsyncHTTPTransport": "HTTPTransport",
    "aclose": "close",
    "aiter_bytes": "iter_bytes",
    "aiter_sse": "iter_sse",
    "_aio": "_sio",
    "__aiter__": "__iter__",
    "AsyncExitStack": "ExitStack",
    "enter_async_context": "enter_context",
}

HEADER = "# Generated from src/sbx/_async/{name} by scripts/gen_sync.py: do not edit.\n"


def generate(out_dir: Path) -> list[Path]:
    """Write the sync modules for every async module into out_dir."""
    sources = sorted((SRC / "_async").glob("*.py"))
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "_async"
        staged.mkdir()
        for src in sources:
            (staged / src.name).write_text(src.read_text())
        rule = unasync.Rule(fromdir="/_async/", todir="/_sync/", additional_replacements=RENAMES)
        unasync.unasync_files([str(staged / s.name) for s in sources], [rule])
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for src in sources:
            text = (Path(tmp) / "_sync" / src.name).read_text()
            text = text.replace(
                "The sync twin in ../_sync/ is generated from this file by",
                "This sync twin is generated from ../_async/ by",
            )
            # typing.Generator takes three parameters where AsyncGenerator takes two.
            text = re.sub(r"\bGenerator\[([^\[\],]+), None\]", r"Generator[\1, None, None]", text)
            dst = out_dir / src.name
            dst.write_text(HEADER.format(name=src.name) + text)
            written.append(dst)
        return written


def main() -> int:
    """Generate, or with --check compare with what is committed."""
    if "--check" not in sys.argv[1:]:
        for path in generate(SRC / "_sync"):
            print(f"wrote {os.path.relpath(path)}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        stale = []
        for path in generate(Path(tmp)):
            committed = SRC / "_sync" / path.name
            new = path.read_text()
            old = committed.read_text() if committed.exists() else ""
            if new != old:
                stale.append(committed)
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(committed), "generated"))
        if stale:
            print(f"stale: {', '.join(map(str, stale))}; run python scripts/gen_sync.py", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
