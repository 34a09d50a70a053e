"""The CUDA root merged from archives that each pass the unpacker (issue 30, points 2 and 10).

The property builds two or three component archives from a grammar of folders, files and links
(links to ``.``, through other links, up and out, to nothing, in loops, and the root's own
layout folders ``lib``, ``targets`` and ``licenses``), unpacks each with the real unpacker (an
archive it refuses alone is not this test's), and then either the merged tree is refused by
:func:`judge_merged`, or merging it as ``cuda install`` does writes nothing outside the root,
leaves every path of the root resolving inside it, and passes the check on disk.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dswheels.cuda.effects.install_toolkit import _link, _merge
from dswheels.cuda.effects.merged_root import check_links_on_disk, judge_merged
from dswheels.cuda.redist import root_links
from dswheels.host.unpack import extract_archive
from dswheels.kernel.archive import tree_problems
from dswheels.kernel.errors import SourceError
from tests.support.fuzz import examples

Member = tuple[str, str]  # (name below the top folder, link text; "" for a file)


def _archive(path: Path, members: Sequence[Member]) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, link in members:
            info = tarfile.TarInfo(f"top/{name}")
            if link:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            else:
                data = name.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())
    return path


def _unpacked(root: Path, components: Sequence[Sequence[Member]]) -> list[tuple[str, Path]] | None:
    """Each component's archive unpacked by the real unpacker; None when it refuses one alone."""
    parts = []
    for number, members in enumerate(components):
        archive = _archive(root / f"c{number}.tar", members)
        part = root / "staging" / "parts" / f"c{number}"
        try:
            extract_archive(archive, part)
        except SourceError:
            return None
        parts.append((f"c{number}", part))
    return parts


def _everything(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): str(p.readlink()) if p.is_symlink() else p.read_text() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
        if "staging" not in p.relative_to(root).parts
    }


def _merge_as_cuda_install(parts: list[tuple[str, Path]], merged: Path, os_name: str) -> None:
    merged.mkdir()
    for component, part in parts:
        _merge(part, merged, component, root=merged)
    for link, target in root_links(os_name):
        _link(merged, link, target)


def test_the_issues_three_links_are_refused_before_anything_is_moved(tmp_path: Path) -> None:
    parts = _unpacked(tmp_path, [[("a", ".")], [("b", "a/a/../../outside"), ("licenses", "b")], [("LICENSE", "")]])
    assert parts is not None, "each archive passes the unpacker alone"
    with pytest.raises(SourceError, match="would merge into a root whose links") as caught:
        judge_merged(parts, "linux", toolkit="13.0.3")
    assert "'b' -> 'a/a/../../outside' resolves outside the tree" in str(caught.value.details)
    assert "c1 carries a top-level licenses" in str(caught.value.details)


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ({("x",): ".", ("y",): "x/.."}, "resolves outside"),
        ({("p",): "q", ("q",): "p"}, "resolves outside the tree, loops"),
        ({("lib",): None, ("lib64",): "lib", ("lib64", "f"): None}, "lies below the link 'lib64'"),
        ({("targets",): "nowhere"}, "names nothing in it"),
        ({("include",): None, ("a",): "x/../include"}, "names nothing in it"),  # x/.. only where x exists
        ({("a",): "/etc"}, "an absolute or empty target"),
        ({("lib",): None, ("lib", "f"): "../lib/f"}, "resolves outside the tree, loops"),  # itself
    ],
)
def test_tree_problems(entries: dict[tuple[str, ...], str | None], problem: str) -> None:
    assert any(problem in p for p in tree_problems(entries)), tree_problems(entries)


def test_a_layout_link_below_an_archives_file_is_refused(tmp_path: Path) -> None:
    """An archive's file where dswheels' layout link needs a folder (found by the cuda_root fuzz target:
    the link's folder could not be made, a traceback)."""
    parts = _unpacked(tmp_path, [[("include/own.h", "")], [("targets/x86_64-linux", "")]])
    assert parts is not None
    with pytest.raises(SourceError) as caught:
        judge_merged(parts, "linux", toolkit="13.0.3")
    assert "lies below the file 'targets/x86_64-linux'" in str(caught.value.details)
    assert any(
        "through a file" in p or "below the file" in p
        for p in tree_problems({("f",): None, ("l",): "f/x"}, files={("f",)})
    )


def test_a_tree_with_links_that_stay_inside_has_no_problem() -> None:
    entries = {
        ("lib", "libx.so.13.0"): None,
        ("lib", "libx.so.13"): "libx.so.13.0",
        ("lib", "libx.so"): "libx.so.13",
        ("lib64",): "lib",
        ("targets", "x86_64-linux", "include"): "../../include",
        ("include", "a.h"): None,
    }
    assert tree_problems(entries) == []


_NAMES = ["a", "b", "lib", "lib64", "include", "targets", "licenses", "lib/f", "a/f", "targets/x86_64-linux", "LICENSE"]
_LINKS = [".", "..", "a", "b", "lib", "a/..", "a/a/../..", "b/../..", "a/a/../../outside", "nowhere", "x/..", "../x"]


@st.composite
def _component(draw: st.DrawFn) -> list[Member]:
    members = draw(
        st.lists(
            st.tuples(st.sampled_from(_NAMES), st.sampled_from(["", "", *_LINKS])),
            max_size=4,
            unique_by=lambda m: m[0],
        )
    )
    return [("include/own.h", ""), *members]


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(components=st.lists(_component(), min_size=2, max_size=3), os_name=st.sampled_from(["linux", "windows"]))
def test_a_merged_root_is_refused_or_stays_inside(
    tmp_path_factory: pytest.TempPathFactory, components: list[list[Member]], os_name: str
) -> None:
    root = tmp_path_factory.mktemp("m")
    (root / "outside").mkdir()
    (root / "outside" / "sentinel").write_text("mine")
    parts = _unpacked(root, components)
    if parts is None:
        return
    before = _everything(root)
    try:
        judge_merged(parts, os_name, toolkit="13.0.3")
    except SourceError:
        assert _everything(root) == before
        return
    merged = root / "staging" / "root"
    refusal = ""
    try:
        _merge_as_cuda_install(parts, merged, os_name)
    except SourceError as exc:  # two components that carry one path differently: refused, and only that
        refusal = exc.message
    assert _everything(root) == before, "written outside the root"
    if refusal:
        assert "carries" in refusal, refusal
        return
    check_links_on_disk(merged, toolkit="13.0.3")
    real = os.path.realpath(merged)
    for path in merged.rglob("*"):
        resolved = os.path.realpath(path)
        assert resolved == real or resolved.startswith(real + os.sep), f"{path} -> {resolved}"
        assert path.exists(), f"{path} names nothing"
