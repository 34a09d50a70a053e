"""The CUDA root merged from several archives, judged as one tree (issue 30, point 2).

The unpacker judges each archive alone: every link it makes resolves inside that archive's
own tree. Merged, links from different archives meet: a link to ``.`` in one and a link
through it in another resolve outside the root, and a later component's files would be moved
through them. So the tree the merge *will* make, dswheels' own links
(:func:`dswheels.cuda.redist.root_links`) and ``licenses/`` included, is judged before anything
is moved (:func:`judge_merged`), and the merged root's links once more on disk, as the file
system resolves them (:func:`check_links_on_disk`).
"""

from __future__ import annotations

import os
from pathlib import Path

from dswheels.cuda.redist import root_links
from dswheels.kernel.archive import Parts, tree_problems
from dswheels.kernel.errors import SourceError

__all__ = ["LICENSES", "check_links_on_disk", "judge_merged"]

LICENSES = "licenses"  # the root's folder of each archive's top-level files: dswheels', never an archive's
_SHOWN = 8
_HINT = (
    "each archive's sha256 is the pinned JSON's, so the JSON or its pin lists archives that are not NVIDIA's "
    "layout: check where the JSON came from (--redist-url, --redist-sha256)"
)


def _entries(parts: list[tuple[str, Path]], os_name: str) -> tuple[dict[Parts, str | None], set[Parts], list[str]]:
    """Every path the merged root will hold (its link text, or None), where the merge and the root's own
    links will place it (the first component's entry where two have one: the merge refuses them if they
    differ), which of them are files, and the archives that carry a top-level ``licenses``."""
    entries: dict[Parts, str | None] = {}
    regular: set[Parts] = set()
    problems = []
    for component, part in parts:
        for folder, dirs, files in os.walk(part):  # links to folders are listed, never entered
            here = Path(folder).relative_to(part).parts
            for name in (*dirs, *files):
                path = Path(folder, name)
                text = str(path.readlink()) if path.is_symlink() else None
                key: Parts = (*here, name)
                if not here and name == LICENSES:
                    problems.append(f"{component} carries a top-level {LICENSES} (the root's folder of their licences)")
                elif not here and text is None and path.is_file():
                    key = (LICENSES, component, name)
                if text is None and path.is_file():
                    regular.add(key)
                entries.setdefault(key, text)
    for link, target in root_links(os_name):
        entries.setdefault(tuple(link.split("/")), target)
    return entries, regular, problems


def judge_merged(parts: list[tuple[str, Path]], os_name: str, *, toolkit: str) -> None:
    """``SourceError`` (exit 4) when the unpacked ``parts`` ((component, folder), in merge order) would
    merge into a root with something below a link, or a link that leaves the root, loops or names nothing."""
    entries, regular, problems = _entries(parts, os_name)
    problems += tree_problems(entries, files=regular)
    if problems:
        shown = problems[:_SHOWN] + ([f"... and {len(problems) - _SHOWN} more"] if len(problems) > _SHOWN else [])
        raise SourceError(
            f"NVIDIA's archives of CUDA {toolkit} would merge into a root whose links lead out of it, through "
            f"each other or to nothing: {problems[0]}",
            details="\n".join(shown),
            hint=_HINT,
        )


def check_links_on_disk(merged: Path, *, toolkit: str) -> None:
    """Every link of the merged root, as the file system resolves it: inside the root, naming something."""
    real = os.path.realpath(merged)
    for folder, dirs, files in os.walk(merged):
        for name in (*dirs, *files):
            path = Path(folder, name)
            if not path.is_symlink():
                continue
            target = os.path.realpath(path)
            if not ((target == real or target.startswith(real + os.sep)) and path.exists()):
                raise SourceError(
                    f"the CUDA {toolkit} root assembled from NVIDIA's archives has a link "
                    f"{path.relative_to(merged).as_posix()} -> {path.readlink()} that leads out of it or to nothing",
                    hint=_HINT,
                )
