"""Files inside a sandbox through the sync client, and the unpacking of
hostile archives."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

import sbx
from sbx import _tar


def test_write_read(busybox: sbx.Sandbox) -> None:
    files = busybox.files
    assert files.write("/src/a.py", "print('hi')\nline2\nline3\n") == 24
    assert files.read("/src/a.py") == "print('hi')\nline2\nline3\n"
    assert files.read("/src/a.py", start_line=2, end_line=3) == "line2\nline3\n"
    blob = bytes(range(256)) * 100
    files.write("/bin/data.bin", blob, mode=0o751)
    assert files.read_bytes("/bin/data.bin") == blob
    with pytest.raises(UnicodeDecodeError):
        files.read("/bin/data.bin")
    assert busybox.exec(["stat", "-c", "%a", "/bin/data.bin"]).stdout.strip() == "751"
    with pytest.raises(sbx.ProtocolError, match="larger"):
        files.read_bytes("/bin/data.bin", max_bytes=1000)


def test_errors_are_python_errors(busybox: sbx.Sandbox) -> None:
    with pytest.raises(FileNotFoundError) as missing:
        busybox.files.read("/no/such/file")
    assert isinstance(missing.value, sbx.NoSuchFileError) and missing.value.status == 404
    with pytest.raises(IsADirectoryError):
        busybox.files.read("/etc")
    with pytest.raises(FileNotFoundError):
        busybox.files.list("/no/such/dir")


def test_list(busybox: sbx.Sandbox) -> None:
    busybox.files.write("/work/f.txt", "x")
    busybox.exec(["mkdir", "/work/sub"])
    listing = busybox.files.list("/work")
    assert [(e.name, e.type) for e in listing] == [("sub", "dir"), ("f.txt", "file")]
    entry = listing.entries[1]
    assert entry.size == 1 and entry.mode == "0644" and entry.mtime is not None


def test_editor(busybox: sbx.Sandbox) -> None:
    files = busybox.files
    files.create("/e.txt", "alpha\nbeta\nbeta\n")
    with pytest.raises(FileExistsError):
        files.create("/e.txt", "again")
    with pytest.raises(sbx.MultipleMatchesError) as many:
        files.str_replace("/e.txt", "beta", "gamma")
    assert many.value.lines == [2, 3]
    with pytest.raises(sbx.NoMatchError):
        files.str_replace("/e.txt", "delta", "x")
    files.str_replace("/e.txt", "alpha", "ALPHA")
    files.insert("/e.txt", 0, "top")
    assert files.read("/e.txt") == "top\nALPHA\nbeta\nbeta\n"
    assert "ALPHA" in files.view("/e.txt", view_range=(2, 2))
    files.undo_edit("/e.txt")
    assert files.read("/e.txt") == "ALPHA\nbeta\nbeta\n"


def test_upload_download(busybox: sbx.Sandbox, tmp_path: Path) -> None:
    tree = tmp_path / "proj"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "mod.py").write_text("X = 1\n")
    (tree / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (tree / "run.sh").chmod(0o755)
    (tree / "link").symlink_to("pkg/mod.py")
    (tree / "big.bin").write_bytes(os.urandom(300_000))
    up = busybox.files.upload(tree, "/srv")
    assert up.path == "/srv" and up.entries == 6
    assert busybox.exec(["/srv/proj/run.sh"]).stdout == "ran\n"
    assert busybox.files.read("/srv/proj/link") == "X = 1\n"
    single = tmp_path / "one.txt"
    single.write_text("one\n")
    busybox.files.upload(single, "/srv/new/dir")
    assert busybox.files.read("/srv/new/dir/one.txt") == "one\n"

    # Out again: into an existing directory, and to a new name.
    out = tmp_path / "out"
    out.mkdir()
    got = busybox.files.download("/srv/proj", out)
    assert got == out / "proj"
    assert (got / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert (got / "big.bin").read_bytes() == (tree / "big.bin").read_bytes()
    assert os.readlink(got / "link") == "pkg/mod.py"
    assert stat.S_IMODE((got / "run.sh").stat().st_mode) == 0o755
    renamed = busybox.files.download("/srv/new/dir/one.txt", tmp_path / "renamed.txt")
    assert renamed.read_text() == "one\n"
    with pytest.raises(FileNotFoundError):
        busybox.files.download("/srv/none", out)
    with pytest.raises(sbx.ProtocolError, match="max_bytes"):
        busybox.files.download("/srv/proj", tmp_path / "capped", max_bytes=100_000)
    assert not (tmp_path / "capped").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.txt", "out", "proj", "renamed.txt"]


def test_download_keeps_absolute_links_as_links(busybox: sbx.Sandbox, tmp_path: Path) -> None:
    busybox.exec(["sh", "-c", "mkdir /d && ln -s /etc/passwd /d/abs && echo data > /d/f"], check=True)
    got = busybox.files.download("/d", tmp_path)
    assert os.readlink(got / "abs") == "/etc/passwd" and (got / "f").read_text() == "data\n"


def _tar_of(*members: tuple[tarfile.TarInfo, bytes]) -> _tar.SpooledDownload:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tf.addfile(info, io.BytesIO(data) if info.isreg() else None)
    spool = _tar.SpooledDownload(None, "test")
    spool.write(buf.getvalue())
    return spool


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    return info


@pytest.mark.parametrize(
    "members, error",
    [
        ([(_member("d/../../escape"), b"x")], "unsafe"),
        ([(_member("d/link", tarfile.SYMTYPE, "/tmp"), b""), (_member("d/link/through"), b"x")], "unsafe"),
        ([(_member("d/up", tarfile.SYMTYPE, "../.."), b""), (_member("d/up/through"), b"x")], "unsafe"),
        ([(_member("d/hard", tarfile.LNKTYPE, "/etc/passwd"), b"")], "unsafe"),
        ([(_member("d/dev", tarfile.BLKTYPE), b"")], "device"),
        ([(_member("d/fifo", tarfile.FIFOTYPE), b"")], "device"),
    ],
)
def test_hostile_archives_write_nothing_outside(tmp_path: Path, members: list, error: str) -> None:  # type: ignore[type-arg]
    dest = tmp_path / "dest"
    dest.mkdir()
    spool = _tar_of(*members)
    with pytest.raises(sbx.ProtocolError, match=error):
        _tar.extract_download(spool, "d", dest)
    spool.close()
    assert not (tmp_path / "escape").exists() and not Path("/tmp/through").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest"]


def test_archive_entries_are_tamed(tmp_path: Path) -> None:
    spool = _tar_of(
        (_member("d", tarfile.DIRTYPE, mode=0o755), b""),
        (_member("d/suid", mode=0o4755), b"x"),
        (_member("other/ignored"), b"y"),
        (_member("/d/abs"), b"z"),
    )
    got = _tar.extract_download(spool, "d", tmp_path)
    spool.close()
    assert stat.S_IMODE((got / "suid").stat().st_mode) == 0o755
    assert (got / "abs").read_bytes() == b"z"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
