"""The build context the SDK sends: .dockerignore matched as Go's
moby/patternmatcher matches it, and the tar of the context. No server."""

from __future__ import annotations

import io
import os
import socket
import tarfile
from pathlib import Path

import pytest

from sbx import _tar
from sbx._dockerignore import PatternMatcher, go_clean, read_patterns
from sbx._wire import build_params

# (ignore file lines, path, excluded?): the answers are those of
# github.com/moby/patternmatcher v0.6.1 (ignorefile.ReadAll, then
# MatchesOrParentMatches), as docker build and the sbx CLI compute them.
CASES = [
    (['*.go'], 'a.go', True),
    (['*.go'], 'dir/a.go', False),
    (['**/*.go'], 'dir/sub/a.go', True),
    (['**/*.go'], 'a.go', True),
    (['dir'], 'dir/sub/file', True),
    (['dir/*'], 'dir/file', True),
    (['dir/*'], 'dir/sub/file', True),
    (['dir/*'], 'dir', False),
    (['a?c'], 'abc', True),
    (['a?c'], 'a/c', False),
    (['a?c'], 'abbc', False),
    (['**'], 'anything/at/all', True),
    (['dir/**'], 'dir/x/y', True),
    (['dir/**'], 'dirx', False),
    (['dir/**/z'], 'dir/z', True),
    (['dir/**/z'], 'dir/a/b/z', True),
    (['*', '!keep'], 'keep', False),
    (['*', '!keep'], 'other', True),
    (['*', '!keep', 'keep'], 'keep', True),
    (['secret', '!secret/ok'], 'secret/ok', False),
    (['secret', '!secret/ok'], 'secret/no', True),
    (['/abs/x'], 'abs/x', True),
    (['./rel//y/'], 'rel/y', True),
    (['a/../b'], 'b', True),
    (['# comment', ' spaced '], 'spaced', True),
    (['# comment'], '# comment', False),
    (['[a-c]x'], 'bx', True),
    (['[a-c]x'], 'dx', False),
    (['[^a]x'], 'bx', True),
    (['[^a]x'], 'ax', False),
    (['a.txt'], 'a.txt', True),
    (['a.txt'], 'aXtxt', False),
    (['\\*x'], '*x', True),
    (['\\*x'], 'ax', False),
    (['**/node_modules'], 'node_modules', True),
    (['**/node_modules'], 'a/node_modules/b', True),
    (['**.log'], 'x/y.log', True),
    (['*/b'], 'a/b/c', True),
    (['*/b'], 'b', False),
    (['a/*/c'], 'a/b/c', True),
    (['a/*/c'], 'a/b/d/c', False),
    (['(x)'], '(x)', True),
    (['a+b'], 'a+b', True),
    (['{a}'], '{a}', True),
    (['$x'], '$x', True),
    (['dir', '!dir/keep', 'dir/keep/no'], 'dir/keep/no', True),
    (['dir', '!dir/keep', 'dir/keep/no'], 'dir/keep/yes', False),
    (['!x'], 'x', False),
    (['*.md', '!README*.md', 'README-secret.md'], 'README-secret.md', True),
    (['*.md', '!README*.md', 'README-secret.md'], 'README-x.md', False),
]


@pytest.mark.parametrize("lines, path, excluded", CASES)
def test_matches_as_patternmatcher(lines: list[str], path: str, excluded: bool) -> None:
    matcher = PatternMatcher(read_patterns("\n".join(lines).encode()))
    assert matcher.matches_or_parent_matches(path) is excluded


def test_ignore_file_reading() -> None:
    data = "\ufeff# a comment\n  /top/x/  \r\n\n!  ./keep\n #not a comment\n".encode()
    assert read_patterns(data) == ["top/x", "!keep", "#not a comment"]
    assert PatternMatcher(["x", "!y"]).exclusions and not PatternMatcher(["x"]).exclusions


def test_bad_patterns_are_refused() -> None:
    with pytest.raises(ValueError, match="illegal exclusion"):
        PatternMatcher(read_patterns(b"!\n"))
    with pytest.raises(ValueError, match="bad pattern"):
        PatternMatcher(["[a-"])


@pytest.mark.parametrize(
    "path, want",
    [("", "."), ("a//b/./c/", "a/b/c"), ("../../a", "../../a"), ("/../a", "/a"), ("a/..", "."), ("//a", "/a")],
)
def test_go_clean(path: str, want: str) -> None:
    assert go_clean(path) == want


def _names(context: Path, dockerfile: str = "Dockerfile") -> dict[str, tarfile.TarInfo]:
    data = b"".join(_tar.context_chunks(context, dockerfile))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        return {m.name: m for m in tf.getmembers()}


def test_context_tar_leaves_out_what_dockerignore_excludes(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "app" / "sub").mkdir(parents=True)
    (ctx / "secrets").mkdir()
    (ctx / "Dockerfile").write_text("FROM busybox\n")
    (ctx / "app" / "main.txt").write_text("main")
    (ctx / "app" / "debug.log").write_text("log")
    (ctx / "app" / "sub" / "keep.log").write_text("kept")
    (ctx / "secrets" / "key").write_text("k")
    (ctx / "secrets" / "public").write_text("p")
    (ctx / ".dockerignore").write_text("**/*.log\n!app/sub/keep.log\nsecrets\n!secrets/public\nDockerfile\n.dockerignore\n")
    os.symlink("app/main.txt", ctx / "link")
    os.mkfifo(ctx / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ctx / "sock"))
    try:
        members = _names(ctx)
    finally:
        sock.close()
    assert sorted(members) == [
        ".dockerignore",
        "Dockerfile",
        "app",
        "app/main.txt",
        "app/sub",
        "app/sub/keep.log",
        "link",
        "secrets/public",
    ]
    assert members["link"].issym() and members["link"].linkname == "app/main.txt"
    assert members["app"].isdir() and members["app/main.txt"].size == 4
    assert all(m.uid == 0 and m.gid == 0 and m.uname == "" for m in members.values())


def test_context_tar_prefers_the_dockerfiles_ignore_file(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "app.Dockerfile").write_text("FROM busybox\n")
    (tmp_path / "build" / "app.Dockerfile.dockerignore").write_text("a\n")
    (tmp_path / ".dockerignore").write_text("b\n")
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    members = _names(tmp_path, "build/app.Dockerfile")
    assert "a" not in members and "b" in members and "build/app.Dockerfile" in members
    assert _names(tmp_path, "Dockerfile").keys() >= {"a"} and "b" not in _names(tmp_path, "Dockerfile")


def test_context_tar_without_ignore_file_sends_everything(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("f")
    os.link(tmp_path / "d" / "f", tmp_path / "g")
    members = _names(tmp_path)
    assert sorted(members) == ["d", "d/f", "g"]
    assert members["g"].islnk() and members["g"].linkname == "d/f"


def test_build_params() -> None:
    params, dockerfile = build_params(
        {"context_dir": "/ctx", "dockerfile": "/ctx/sub/Dockerfile.dev", "tag": "app:1", "no_cache": True,
         "build_args": {"A": "1", "B": "x=y"}, "pull": "never"}
    )  # fmt: skip
    assert dockerfile == "sub/Dockerfile.dev"
    assert params == [
        ("dockerfile", "sub/Dockerfile.dev"), ("tag", "app:1"), ("pull", "never"), ("no_cache", "true"),
        ("build_arg", "A=1"), ("build_arg", "B=x=y"),
    ]  # fmt: skip
    assert build_params({"context_dir": "/ctx"}) == ([("dockerfile", "Dockerfile")], "Dockerfile")
    for bad in ({"dockerfile": "../Dockerfile"}, {"dockerfile": "/elsewhere/Dockerfile"}, {"build_args": {"A=B": "1"}}):
        with pytest.raises(ValueError):
            build_params({"context_dir": "/ctx", **bad})


def test_context_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        _tar.context_chunks(tmp_path / "missing", "Dockerfile")
