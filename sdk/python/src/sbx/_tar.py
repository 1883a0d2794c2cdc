"""Tar archives for uploads and downloads, with the standard library.

Uploads stream a tar of a local file or directory in bounded memory: each
member's header comes from :mod:`tarfile`, its content is read in chunks.
Downloads come from inside a sandbox and are hostile: they are unpacked
with tarfile's filters (names stay inside the destination, also through
links unpacked before them; hard links only to files of the archive; no
device files or FIFOs; set-id bits cleared), symbolic links are kept as
links, and only the entry the caller asked for is kept.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import IO, Callable, Iterator, Optional

from ._dockerignore import PatternMatcher, read_patterns
from ._errors import ProtocolError, SbxError

CHUNK = 64 << 10
_BLOCK = tarfile.BLOCKSIZE


def tar_chunks(path: str | os.PathLike[str], arcname: Optional[str] = None) -> Iterator[bytes]:
    """A tar archive of ``path`` (a file, or a directory with everything
    under it) as chunks of bytes; entries are named from ``arcname``
    (default: the base name of ``path``; "." puts a directory's contents at
    the top). Symbolic links are archived as links; sockets are left out.
    The path is checked at once; the archive is made as it is read."""
    root = os.fspath(path)
    if not os.path.lexists(root):
        raise FileNotFoundError(f"{root} does not exist")
    base = arcname if arcname is not None else os.path.basename(os.path.normpath(root))
    if not base or base == ".." or "/" in base or (base == "." and arcname is None):
        raise ValueError(f"cannot name the archive entry of {root!r} ({base!r})")
    return _archive(root, base)


def _archive(root: str, base: str) -> Iterator[bytes]:
    # A TarFile over a scratch buffer builds the headers (pax for long
    # names) and tracks hard links; the archive itself is written here.
    headers = tarfile.TarFile(fileobj=io.BytesIO(), mode="w", format=tarfile.PAX_FORMAT)
    for full, name in _walk(root, base):
        info = headers.gettarinfo(full, name)
        if info is None:
            continue  # a socket
        yield info.tobuf(tarfile.PAX_FORMAT, headers.encoding, headers.errors)
        if info.isreg() and info.size:
            yield from _content(full, info.size)
    yield b"\0" * (2 * _BLOCK)


def _walk(root: str, base: str) -> Iterator[tuple[str, str]]:
    yield root, base
    if os.path.isdir(root) and not os.path.islink(root):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            prefix = base if rel == "." else f"{base}/{rel}"
            for name in sorted(dirnames + filenames):
                yield os.path.join(dirpath, name), f"{prefix}/{name}"


def _content(full: str, size: int) -> Iterator[bytes]:
    """Exactly ``size`` bytes of the file, zero-filled if it shrank, then the
    padding to a whole block."""
    left = size
    with open(full, "rb") as f:
        while left > 0:
            data = f.read(min(CHUNK, left))
            if not data:
                break
            left -= len(data)
            yield data
    while left > 0:
        n = min(CHUNK, left)
        left -= n
        yield b"\0" * n
    pad = -size % _BLOCK
    if pad:
        yield b"\0" * pad


def context_chunks(context_dir: str | os.PathLike[str], dockerfile: str) -> Iterator[bytes]:
    """A build context as docker build sends it: a tar of the directory
    ``context_dir`` minus what its ignore file excludes (``<dockerfile>
    .dockerignore`` if there is one, else ``.dockerignore``), with the
    Dockerfile (``dockerfile``, a slash path inside the context) and the
    ignore files always in. Owners are 0:0, symbolic links go as links,
    sockets, FIFOs and devices are left out. The directory and the ignore
    file are checked at once; the archive is made as it is read."""
    root = os.fspath(context_dir)
    if not os.path.isdir(root):
        raise NotADirectoryError(f"build context {root!r} is not a directory")
    matcher = None
    for name in (dockerfile + ".dockerignore", ".dockerignore"):
        try:
            with open(os.path.join(root, name), "rb") as f:
                matcher = PatternMatcher(read_patterns(f.read()))
            break
        except FileNotFoundError:
            continue
    keep = {".dockerignore", dockerfile, dockerfile + ".dockerignore"}
    return _context_archive(root, matcher, keep)


def _context_archive(root: str, matcher: Optional[PatternMatcher], keep: set[str]) -> Iterator[bytes]:
    headers = tarfile.TarFile(fileobj=io.BytesIO(), mode="w", format=tarfile.PAX_FORMAT)
    for full, rel in _context_walk(root, "", matcher, keep):
        info = headers.gettarinfo(full, rel)
        if info is None or info.ischr() or info.isblk() or info.isfifo():
            continue
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        yield info.tobuf(tarfile.PAX_FORMAT, headers.encoding, headers.errors)
        if info.isreg() and info.size:
            yield from _content(full, info.size)
    yield b"\0" * (2 * _BLOCK)


def _context_walk(root: str, rel: str, matcher: Optional[PatternMatcher], keep: set[str]) -> Iterator[tuple[str, str]]:
    """(path, context path) of what the context sends, in Go's WalkDir
    order. An excluded directory is still walked when exceptions may let
    some of its entries back in."""
    base = os.path.join(root, rel) if rel else root
    with os.scandir(base) as it:
        entries = sorted(it, key=lambda e: os.fsencode(e.name))
    for entry in entries:
        name = f"{rel}/{entry.name}" if rel else entry.name
        is_dir = entry.is_dir(follow_symlinks=False)
        if matcher is not None and name not in keep and matcher.matches_or_parent_matches(name):
            if is_dir and matcher.exclusions:
                yield from _context_walk(root, name, matcher, keep)
            continue
        yield entry.path, name
        if is_dir:
            yield from _context_walk(root, name, matcher, keep)


def file_chunks(path: str) -> Iterator[bytes]:
    """The bytes of a local file, in chunks."""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return
            yield chunk


class SpooledDownload:
    """A downloaded archive on disk, refused past ``max_bytes``."""

    def __init__(self, max_bytes: Optional[int], what: str) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="sbx-download-")
        self.size = 0
        self.max_bytes = max_bytes
        self.what = what

    def write(self, chunk: bytes) -> None:
        """Append a chunk; ProtocolError once the archive is over the cap."""
        self.size += len(chunk)
        if self.max_bytes is not None and self.size > self.max_bytes:
            raise ProtocolError(f"{self.what}: the archive is larger than max_bytes={self.max_bytes}; raise it to download more")
        self.file.write(chunk)

    def close(self) -> None:
        """Delete the spooled archive."""
        self.file.close()


Filter = Callable[[tarfile.TarInfo, str], Optional[tarfile.TarInfo]]


def _filters() -> tuple[Filter, Filter]:
    tar_filter = getattr(tarfile, "tar_filter", None)
    data_filter = getattr(tarfile, "data_filter", None)
    if tar_filter is None or data_filter is None:
        raise SbxError("download: safe extraction needs tarfile's filters (Python 3.10.12, 3.11.4 or newer)")
    return tar_filter, data_filter


def extract_download(spool: SpooledDownload, remote_name: str, dest: str | os.PathLike[str]) -> Path:
    """Unpack the archive of one remote file or directory named
    ``remote_name`` (its base name) to ``dest``: into it when ``dest`` is an
    existing directory, else as ``dest`` itself. Returns the local path."""
    tar_filter, data_filter = _filters()
    target = Path(dest)
    spool.file.seek(0)
    if target.is_dir():
        into, final = target, target / remote_name
    else:
        if not target.parent.is_dir():
            raise FileNotFoundError(f"download: the directory {target.parent} does not exist")
        into, final = Path(tempfile.mkdtemp(prefix=".sbx-download-", dir=target.parent)), target

    def only_ours(member: tarfile.TarInfo, path: str) -> Optional[tarfile.TarInfo]:
        top = member.name.lstrip("/").split("/", 1)[0]
        if top != remote_name:
            return None  # anything but the asked-for entry is dropped
        if member.ischr() or member.isblk() or member.isfifo():
            raise ProtocolError(f"download: the archive holds a device file or FIFO, {member.name!r}; refused")
        if member.islnk():
            # A hard link must name a file of this archive, never one of
            # the host (the data filter refuses absolute and outside ones).
            return data_filter(member, path)
        # Names are made relative and must stay inside once symbolic links
        # already unpacked are followed; set-id bits are cleared. Symbolic
        # links themselves are kept as they are, as docker cp keeps them.
        return tar_filter(member, path)

    try:
        with tarfile.open(fileobj=spool.file, mode="r:") as tf:
            try:
                tf.extractall(into, filter=only_ours)
            except tarfile.FilterError as e:
                raise ProtocolError(f"download: the sandbox sent an unsafe archive entry, refused: {e}") from e
            except tarfile.TarError as e:
                raise ProtocolError(f"download: the sandbox sent a malformed archive: {e}") from e
        got = into / remote_name
        if not got.exists() and not got.is_symlink():
            raise ProtocolError(f"download: the archive holds no entry {remote_name!r}")
        if into is not target:
            os.replace(got, final)
        return final
    finally:
        if into is not target:
            shutil.rmtree(into, ignore_errors=True)
