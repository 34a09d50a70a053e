"""Which members of a source archive may be unpacked, and where their links lead: pure rules.

One rule for every archive kind (tar, tar.gz, zip) and both path flavours: a member name
must be a relative path that stays inside the tree on POSIX *and* on Windows, so ``..``,
absolute paths, backslashes (a separator on Windows), drive letters and ``:`` streams,
UNC names, Windows device names (``CON``, ``NUL``, ``COM1`` ...) and the characters Windows
forbids are refused wherever the build runs. A link is judged by where it *resolves*,
following every other link of the archive the way the file system would
(:func:`resolve_member`), so a chain of links that are each harmless alone cannot reach
outside the tree either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

__all__ = ["MAX_LINK_HOPS", "ArchiveMemberError", "link_parts", "member_parts", "resolve_member", "tree_problems"]

MAX_LINK_HOPS = 40  # what Linux allows (ELOOP) before it gives up on a chain of links

_WINDOWS_FORBIDDEN = set('<>:"|?*\\')
_WINDOWS_DEVICES = re.compile(r"^(con|prn|aux|nul|conin\$|conout\$|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$", re.IGNORECASE)

Parts = tuple[str, ...]


class ArchiveMemberError(ValueError):
    """A member name or link target that could land outside the tree (on some OS)."""


def _check_part(part: str, name: str) -> None:
    if part == "..":
        msg = f"{name!r}: '..' leads out of the tree"
        raise ArchiveMemberError(msg)
    bad = sorted({c for c in part if c in _WINDOWS_FORBIDDEN or ord(c) < 32})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        msg = f"{name!r}: {shown} in a name (a separator, drive or stream on Windows, or a control character)"
        raise ArchiveMemberError(msg)
    if part.rstrip(". ") == "":  # Windows drops trailing dots and spaces: '.. ' is '..' there
        msg = f"{name!r}: a name of only dots and spaces ({part!r}) is '..' or '.' on Windows"
        raise ArchiveMemberError(msg)
    if _WINDOWS_DEVICES.match(part.rstrip(". ")):
        msg = f"{name!r}: {part!r} is a device name on Windows"
        raise ArchiveMemberError(msg)


def member_parts(name: str) -> Parts:
    """The path components of an archive member name; ``ArchiveMemberError`` if it may escape.

    >>> member_parts("./deepspeed-0.19.8/op_builder/builder.py")
    ('deepspeed-0.19.8', 'op_builder', 'builder.py')
    >>> member_parts("top/C:/x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dswheels.kernel.archive.ArchiveMemberError: 'top/C:/x': ':' in a name (a separator, drive or stream on Windows, ...)
    """
    if not name or "\x00" in name:
        msg = f"{name!r}: an empty name or one with a NUL byte"
        raise ArchiveMemberError(msg)
    if name.startswith(("/", "\\")):
        msg = f"{name!r}: an absolute path"
        raise ArchiveMemberError(msg)
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    for part in parts:
        _check_part(part, name)
    return parts


def link_parts(linkname: str) -> Parts:
    """The components of a symlink's target text; ``ArchiveMemberError`` if it is absolute.

    The text follows the rules of member names, except that ``..`` may appear
    (``deepspeed/ops/op_builder -> ../../op_builder`` is how DeepSpeed ships): where it
    leads is for :func:`resolve_member` to say.
    """
    if not linkname or "\x00" in linkname or linkname.startswith(("/", "\\")):
        msg = f"link to {linkname!r}: an absolute or empty target"
        raise ArchiveMemberError(msg)
    parts = tuple(p for p in linkname.split("/") if p not in ("", "."))
    for part in parts:
        if part != "..":
            _check_part(part, linkname)
    return parts


def resolve_member(
    parts: Parts,
    links: Mapping[Parts, str],
    *,
    present: AbstractSet[Parts] | None = None,
    files: AbstractSet[Parts] = frozenset(),
) -> Parts | None:
    """Resolve ``parts`` as the file system would once every link in ``links`` exists.

    ``links`` maps a link's path (from the root) to its target text. Returns the resolved
    path, or None when it leaves the tree at any step or loops more than
    :data:`MAX_LINK_HOPS` times (the file system would give up: refuse it too). With
    ``present`` (every path of the tree), also None when a step passes through a path the tree
    lacks: the file system resolves ``x/..`` only where ``x`` exists; nor through one of ``files``.

    >>> links = {("x", "l1"): "..", ("esc",): "x/l1/.."}
    >>> resolve_member(("x", "l1", "y"), links)
    ('y',)
    >>> resolve_member(("esc", "etc"), links) is None
    True
    """
    pending = list(parts)
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if not done:
                return None
            done.pop()
            continue
        here = (*done, part)
        if (present is not None and here not in present) or (here in files and pending):
            return None
        if here in links:
            hops += 1
            if hops > MAX_LINK_HOPS:
                return None
            pending = [*done, *link_parts(links[here]), *pending]  # from the root again: done holds no link
            done = []
            continue
        done.append(part)
    return tuple(done)


def _shown(parts: Parts) -> str:
    return "/".join(parts) or "."


def tree_problems(entries: Mapping[Parts, str | None], *, files: AbstractSet[Parts] = frozenset()) -> list[str]:
    """What makes a tree unsafe to write into or to hand out, judged as a whole: ``entries`` maps
    every path of the tree to its link text (None: a folder or a file); ``files``: which are files.

    Trees that are each safe alone (a link to ``.`` in one, a link through it in another) can
    together hold links that leave the tree, so a tree merged from several archives is judged
    again, as one: nothing lies below a link (it would be written through it) or a file, and
    every link is a relative text that resolves, through every other link, to a path of the tree
    (not outside it, not in a loop, not to nothing, not through a file). Empty when it is safe.

    >>> tree_problems({("bin",): None, ("x",): ".", ("y",): "x/.."})
    ["the link 'y' -> 'x/..' resolves outside the tree, loops, goes through a file or names nothing in it"]
    >>> tree_problems({("lib",): None, ("lib64",): "lib", ("lib64", "f"): None})
    ["'lib64/f' lies below the link 'lib64'"]
    """
    links = {parts: text for parts, text in entries.items() if text is not None}
    present = {parts[:depth] for parts in entries for depth in range(len(parts) + 1)}
    problems: list[str] = []
    for parts, text in sorted(entries.items()):
        name = _shown(parts)
        below = next((parts[:depth] for depth in range(1, len(parts)) if parts[:depth] in links), None)
        if below is not None:
            problems.append(f"{name!r} lies below the link {_shown(below)!r}")
            continue
        over = next((parts[:depth] for depth in range(1, len(parts)) if parts[:depth] in files), None)
        if over is not None:
            problems.append(f"{name!r} lies below the file {_shown(over)!r}")
            continue
        if text is None:
            continue
        try:
            resolved = resolve_member(parts, links, present=present, files=files)
        except ArchiveMemberError as exc:
            problems.append(f"the link {name!r}: {exc}")
            continue
        if resolved is None:
            problems.append(
                f"the link {name!r} -> {text!r} resolves outside the tree, loops, goes through a file "
                "or names nothing in it"
            )
    return problems
