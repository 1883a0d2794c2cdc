""".dockerignore files, read and matched as docker build reads them.

The rules are those of Go's github.com/moby/patternmatcher (and its
ignorefile reader), which the sbx CLI and docker use: ``*`` and ``?`` match
within one path element, ``**`` any number of elements, ``[...]`` a class,
``\\`` escapes; a line starting with ``!`` is an exception; the last
pattern that matches a path wins, and a pattern matching a parent directory
matches everything under it.
"""

from __future__ import annotations

import re
import warnings
from typing import Optional, Pattern

_ESCAPE = set(".+()|{}$")
_BOM = "\ufeff"


def go_clean(path: str) -> str:
    """Go's path.Clean: the shortest equivalent of a slash path."""
    if not path:
        return "."
    rooted = path.startswith("/")
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not rooted:
                out.append("..")
            continue
        out.append(part)
    cleaned = ("/" if rooted else "") + "/".join(out)
    return cleaned or ("/" if rooted else ".")


def read_patterns(data: bytes) -> list[str]:
    """The patterns of an ignore file's bytes (ignorefile.ReadAll): a
    leading UTF-8 BOM and ``#`` comment lines dropped, each line trimmed
    and cleaned, a leading ``/`` removed (``!`` kept in front)."""
    patterns = []
    text = data.decode("utf-8", "surrogateescape")
    if text.startswith(_BOM):
        text = text[len(_BOM) :]
    for line in text.split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        if line.startswith("#"):
            continue
        pattern = line.strip()
        if not pattern:
            continue
        invert = pattern.startswith("!")
        if invert:
            pattern = pattern[1:].strip()
        if pattern:
            pattern = go_clean(pattern)
            if len(pattern) > 1 and pattern.startswith("/"):
                pattern = pattern[1:]
        patterns.append("!" + pattern if invert else pattern)
    return patterns


class _Pattern:
    """One compiled pattern (patternmatcher.Pattern)."""

    def __init__(self, cleaned: str, exclusion: bool) -> None:
        self.cleaned = cleaned
        self.exclusion = exclusion
        self.kind, self.regexp = _compile(cleaned)

    def match(self, path: str) -> bool:
        if self.kind == "exact":
            return path == self.cleaned
        if self.kind == "prefix":
            return path.startswith(self.cleaned[:-2])
        if self.kind == "suffix":
            suffix = self.cleaned[2:]
            return path.endswith(suffix) or (suffix.startswith("/") and path == suffix[1:])
        assert self.regexp is not None
        return self.regexp.match(path) is not None


def _compile(pattern: str) -> tuple[str, Optional[Pattern[str]]]:
    """The pattern's match kind and, for "regexp", its expression: the
    translation of patternmatcher's compile."""
    regex = "^"
    kind = "exact"
    i, n = 0, len(pattern)
    first = True
    while i < n:
        ch = pattern[i]
        i += 1
        if ch == "*":
            if i < n and pattern[i] == "*":
                i += 1
                if i < n and pattern[i] == "/":
                    i += 1
                if i >= n:
                    if kind == "exact":
                        kind = "prefix"
                    else:
                        regex += ".*"
                        kind = "regexp"
                else:
                    regex += "(.*/)?"
                    kind = "regexp"
                if first:
                    kind = "suffix"
            else:
                regex += "[^/]*"
                kind = "regexp"
        elif ch == "?":
            regex += "[^/]"
            kind = "regexp"
        elif ch in _ESCAPE:
            regex += "\\" + ch
        elif ch == "\\":
            if i < n:
                regex += "\\" + pattern[i]
                i += 1
                kind = "regexp"
            else:
                regex += "\\"
        elif ch in "[]":
            regex += ch
            kind = "regexp"
        else:
            regex += ch
        first = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = re.compile(regex + r"\Z")
    except re.error as e:
        raise ValueError(f".dockerignore: bad pattern {pattern!r}: {e}") from None
    return kind, (compiled if kind == "regexp" else None)


class PatternMatcher:
    """Ignore patterns in their order (patternmatcher.PatternMatcher)."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns: list[_Pattern] = []
        #: Whether any pattern is an exception ("!"): then an excluded
        #: directory must still be walked for the files it lets back in.
        self.exclusions = False
        for raw in patterns:
            p = go_clean(raw.strip()) if raw.strip() else ""
            if not p:
                continue
            exclusion = p.startswith("!")
            if exclusion:
                if len(p) == 1:
                    raise ValueError('.dockerignore: illegal exclusion pattern: "!"')
                p = p[1:]
                self.exclusions = True
            self.patterns.append(_Pattern(p, exclusion))

    def matches_or_parent_matches(self, path: str) -> bool:
        """Whether the slash path (relative to the context) is excluded:
        the last pattern matching it or one of its parent directories wins."""
        matched = False
        parent = go_clean(path.rsplit("/", 1)[0]) if "/" in path else "."
        parent_dirs = parent.split("/")
        for pattern in self.patterns:
            if pattern.exclusion != matched:
                continue  # only an exception can undo a match, and vice versa
            match = pattern.match(path)
            if not match and parent != ".":
                match = any(pattern.match("/".join(parent_dirs[: i + 1])) for i in range(len(parent_dirs)))
            if match:
                matched = not pattern.exclusion
        return matched
