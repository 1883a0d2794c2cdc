"""The package itself: typed (mypy --strict), the generated sync client
current, every public call documented, a wheel that installs."""

from __future__ import annotations

import inspect
import subprocess
import sys
import zipfile
from pathlib import Path

import sbx
from sbx import _units

SDK = Path(__file__).resolve().parents[1]


def _run(*args: str, cwd: Path = SDK) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_types_check_strictly() -> None:
    res = _run(sys.executable, "-m", "mypy", "--strict", "--python-version", "3.10", "src/sbx")
    assert res.returncode == 0, res.stdout + res.stderr


def test_sync_client_is_generated_from_the_async_one() -> None:
    res = _run(sys.executable, "scripts/gen_sync.py", "--check")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}"


def test_every_public_call_has_a_docstring() -> None:
    missing = []
    for name in sbx.__all__:
        obj = getattr(sbx, name)
        if not inspect.isclass(obj) and not inspect.isfunction(obj):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                    continue
                if not (member.__doc__ or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing, f"no docstring: {missing}"


def test_sync_and_async_have_the_same_calls() -> None:
    pairs = [
        (sbx.Client, sbx.AsyncClient),
        (sbx.Sandboxes, sbx.AsyncSandboxes),
        (sbx.Sandbox, sbx.AsyncSandbox),
        (sbx.Session, sbx.AsyncSession),
        (sbx.Files, sbx.AsyncFiles),
        (sbx.Images, sbx.AsyncImages),
        (sbx.Pools, sbx.AsyncPools),
        (sbx.Snapshots, sbx.AsyncSnapshots),
    ]
    for sync, aio in pairs:
        public = {"aclose" if n == "close" else n for n in vars(sync) if not n.startswith("_")}
        apublic = {n for n in vars(aio) if not n.startswith("_")}
        assert public == apublic, (sync.__name__, public ^ apublic)
        for name in public - {"aclose"}:
            if inspect.isfunction(getattr(sync, name)):
                assert inspect.signature(getattr(sync, name)).parameters.keys() == inspect.signature(
                    getattr(aio, name)
                ).parameters.keys(), f"{sync.__name__}.{name}"


def test_units_match_the_server() -> None:
    assert sbx.parse_size("512m") == 512 << 20
    assert sbx.parse_size("1GiB") == 1 << 30
    assert sbx.parse_size("64k") == 64 << 10
    assert sbx.parse_size("1.5g") == 3 << 29
    assert sbx.parse_size(4096) == 4096
    assert sbx.go_duration("1h") == "3600s"
    assert sbx.go_duration("1h30m") == "5400s"
    assert sbx.go_duration(1.5) == "1.5s"
    assert sbx.duration_seconds("250ms") == 0.25
    from datetime import timedelta

    assert sbx.go_duration(timedelta(minutes=10)) == "600s"
    for bad in ("", "12q", "-1", "m"):
        try:
            sbx.parse_size(bad)
        except ValueError:
            continue
        raise AssertionError(f"parse_size({bad!r}) accepted")
    for bad in ("", "10", "1d", "h", "-5s"):
        try:
            sbx.duration_seconds(bad)
        except ValueError:
            continue
        raise AssertionError(f"duration_seconds({bad!r}) accepted")
    t = _units.parse_time("2026-11-24T00:20:01.123456789Z")
    assert t is not None and t.microsecond == 123456 and t.utcoffset() is not None


def test_wheel_builds_and_installs(tmp_path: Path) -> None:
    res = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), ".")
    assert res.returncode == 0, res.stdout + res.stderr
    (wheel,) = tmp_path.glob("sbxrun-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "sbx/py.typed" in names and "sbx/_sync/client.py" in names and "sbx/_async/client.py" in names
    target = tmp_path / "site"
    res = _run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target), str(wheel))
    assert res.returncode == 0, res.stdout + res.stderr
    probe = "import sbx, sys; print(sbx.__file__, sbx.__version__)"
    res = _run(sys.executable, "-c", probe, cwd=target)
    assert res.returncode == 0 and str(target) in res.stdout, res.stdout + res.stderr


def test_wheel_is_ready_to_publish(tmp_path: Path) -> None:
    """The distribution PyPI would get: its own name (``sbx`` is taken on
    PyPI; the import name stays ``sbx``), the version of sbx/_version.py,
    the README as its description, and links."""
    res = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), ".")
    assert res.returncode == 0, res.stdout + res.stderr
    (wheel,) = tmp_path.glob("sbxrun-*.whl")
    z = zipfile.ZipFile(wheel)
    (meta_name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
    meta = z.read(meta_name).decode()
    headers = {}
    for line in meta.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(": ")
        headers.setdefault(key, []).append(value)
    assert headers["Name"] == ["sbxrun"], headers.get("Name")
    assert headers["Version"] == [sbx.__version__]
    assert headers.get("Requires-Python") == [">=3.10"]
    assert headers.get("Description-Content-Type") == ["text/markdown"]
    assert any(u.startswith("Source, https://github.com/sbxrun/sbx") for u in headers.get("Project-URL", []))
    assert "sbx serve" in meta.split("\n\n", 1)[1]


def test_docs_list_every_create_option() -> None:
    """docs/python.md's table names every parameter of sandboxes.create."""
    import re

    from sbx._async.client import AsyncSandboxes

    doc = (SDK.parents[1] / "docs" / "python.md").read_text()
    m = re.search(r"`c\.sandboxes\.create\(image, \*, ([^)]*)\)`", doc)
    assert m, "docs/python.md has no c.sandboxes.create(image, *, ...) row"
    documented = [p.strip() for p in m.group(1).split(",")]
    params = [p for p in inspect.signature(AsyncSandboxes.create).parameters if p not in ("self", "image")]
    assert sorted(documented) == sorted(params), (
        f"missing from the docs: {sorted(set(params) - set(documented))}, "
        f"not parameters: {sorted(set(documented) - set(params))}"
    )
