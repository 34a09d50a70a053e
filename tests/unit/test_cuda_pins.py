"""The toolkit each CUDA minor installs is the newest release NVIDIA published of it, never a pre-release.

What NVIDIA published is PyPI's ``cuda-toolkit`` (one version per toolkit release), recorded in
tests/data/upstream/pypi/cuda-toolkit/json (scripts/record_upstream.py). The shipped matrix must
plan only such toolkits, each one a build runner can install (its redistrib JSON pinned).
"""

from __future__ import annotations

import json

from packaging.version import Version

from dswheels.kernel.compat import Compat, load_compat
from dswheels.kernel.versions import format_version
from dswheels.plan.effects.matrix_file import load_matrix
from dswheels.plan.planner import plan
from tests.conftest import DATA, ROOT

RECORDED = json.loads((DATA / "upstream" / "pypi" / "cuda-toolkit" / "json").read_text(encoding="utf-8"))


def _newest_per_minor() -> dict[tuple[int, ...], str]:
    """CUDA minor -> the newest release on PyPI that is neither a pre-release nor yanked."""
    newest: dict[tuple[int, ...], Version] = {}
    for text, files in RECORDED["releases"].items():
        version = Version(text)
        if version.is_prerelease or version.is_devrelease or not files or all(f["yanked"] for f in files):
            continue
        minor = version.release[:2]
        if minor not in newest or version > newest[minor]:
            newest[minor] = version
    return {minor: str(v) for minor, v in newest.items()}


def _stale(compat: Compat) -> list[str]:
    newest = _newest_per_minor()
    return [
        f"CUDA {format_version(minor)} installs {toolkit.install}; PyPI's newest is {newest[minor]}"
        for minor, toolkit in sorted(compat.cuda.items())
        if minor in newest and toolkit.install != newest[minor]
    ]


def test_the_recording_has_what_the_facts_of_2026_11_27_say() -> None:
    newest = _newest_per_minor()
    assert newest[(13, 4)] == "13.4.3"  # 13.4.0 was only 13.4.0rc1; the release is 13.4.1, then 13.4.2, 13.4.3
    assert "13.4.0rc1" in RECORDED["releases"]
    assert "13.4.0" not in RECORDED["releases"]
    assert newest[(13, 5)] == "13.5.0"
    assert {m: newest[m] for m in ((12, 8), (12, 9), (13, 0), (13, 1), (13, 2), (13, 3))} == {
        (12, 8): "12.8.2",
        (12, 9): "12.9.2",
        (13, 0): "13.0.3",
        (13, 1): "13.1.2",
        (13, 2): "13.2.2",
        (13, 3): "13.3.1",
    }


def test_every_install_pin_is_the_newest_release_of_its_minor() -> None:
    compat = load_compat()
    assert not _stale(compat)
    newest = _newest_per_minor()
    # only 11.7 predates cuda-toolkit on PyPI (its first release is 11.8.0)
    assert sorted(m for m in compat.cuda if m not in newest) == [(11, 7)]
    for toolkit in compat.cuda.values():
        assert not Version(toolkit.install).is_prerelease


def test_a_stale_or_pre_release_pin_is_caught() -> None:
    import dataclasses

    compat = load_compat()
    for install in ("13.4.0", "13.4.0rc1", "13.4.2"):
        cuda = {**compat.cuda, (13, 4): dataclasses.replace(compat.cuda[(13, 4)], install=install)}
        stale = _stale(dataclasses.replace(compat, cuda=cuda))
        assert stale == [f"CUDA 13.4 installs {install}; PyPI's newest is 13.4.3"]


def test_the_shipped_matrix_plans_only_the_newest_toolkits_and_ones_a_runner_can_install() -> None:
    compat = load_compat()
    result = plan(load_matrix(ROOT / "matrix" / "matrix.yml", compat), compat, redist_required=True)
    newest = _newest_per_minor()
    toolkits = {item.toolchain.cuda_toolkit for item in result.planned if item.toolchain.cuda_toolkit}
    assert toolkits  # the shipped matrix has CUDA cells
    for install in toolkits:
        version = Version(install)
        assert not version.is_prerelease, install
        assert install == newest[version.release[:2]], install
    # nothing is dropped for want of a pinned redistrib JSON: every planned toolkit is installable on a runner
    assert not [d for d in result.dropped if any(r.rule == "cuda-redist" for r in d.reasons)]
