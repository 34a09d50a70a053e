"""`dswheels facts check`'s comparison, on the recorded sources (tests/data/upstream/README.md).

The recordings are real subsets of PyPI's JSON and of the CUDA-install action's tables, and
per-variant pages derived from PyPI's file lists (download.pytorch.org cannot be reached from
the dev machine). Facts are planted in a copy of the shipped compat.yml; the sdist-based
checks run against real sdists in tests/integration/test_facts_check.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
import yaml

from dswheels.facts.compare import check_facts, inferred_entries
from dswheels.facts.cuda_action import find_action_pin, table_versions
from dswheels.facts.findings import Kind, Report, render_diff, render_json, render_markdown, render_text
from dswheels.facts.pypi_json import parse_cuda_pin
from dswheels.facts.seen import CudaToolkitSeen, Upstream
from dswheels.facts.yaml_edit import Edit, apply_edits
from dswheels.kernel.compat import parse_compat
from dswheels.kernel.versions import format_version
from tests.conftest import ROOT
from tests.support.upstream import RECORDED, recorded_action_pin, recorded_upstream

SHIPPED = (ROOT / "dswheels" / "compat.yml").read_text(encoding="utf-8")
TODAY = "2026-11-24"


def plant(*edits: Edit) -> str:
    return apply_edits(SHIPPED, edits)


def plant_unpinned(*edits: Edit) -> str:
    """:func:`plant` on compat.yml with no toolkit's redistrib JSON pinned (``redist_sha256``): what an install
    pin is raised on by itself (a pinned JSON is raised with its pin, by a person)."""
    return apply_edits(re.sub(r"^[ \t]*redist_sha256:.*\n", "", SHIPPED, flags=re.MULTILINE), edits)


PLANTED = plant(
    Edit("set", ("torch", "2.14", "latest"), '"2.14.0"'),  # a stale entry
    Edit("set", ("torch", "2.14", "variants"), "{linux: [cu126, cu130], windows: [cu126, cu130]}"),  # cu132 missing
    Edit("set", ("torch", "2.15", "variants", "linux"), "[cu126, cu130, cu132]"),  # the 2.15 + cu126 that was shipped
    Edit("set", ("deepspeed", "releases"), "[" + ", ".join(f'"{v}"' for v in ("0.19.6", "0.19.7")) + "]"),
)


def _by_entry(report: Report) -> dict[str, list[tuple[Kind, str]]]:
    found: dict[str, list[tuple[Kind, str]]] = {}
    for f in report.findings:
        found.setdefault(f.entry, []).append((f.kind, f.message))
    return found


def test_the_recorded_sources_parse() -> None:
    upstream = recorded_upstream()
    assert upstream.torch is not None
    assert upstream.torch_index is not None
    assert upstream.cuda_action is not None
    assert upstream.deepspeed_releases is not None
    assert format_version(upstream.deepspeed_releases[-1].version) == "0.19.8"
    assert upstream.deepspeed_releases[-1].sdist_url.endswith("/deepspeed-0.19.8.tar.gz")
    seen = upstream.torch[(2, 15)]
    assert (seen.latest, seen.released, seen.requires_python) == ("2.15.0", "2026-10-28", ">=3.11")
    assert [str(p) for p in seen.python["windows"]] == ["3.11", "3.12", "3.13", "3.14", "3.14t", "3.15", "3.15t"]
    assert (seen.cuda_pin, seen.cuda_pin_exact) == ("13.2.2", True)
    assert upstream.torch[(2, 14)].latest == "2.14.1"
    assert not upstream.torch[(2, 14)].cuda_pin
    assert upstream.torch_index.variants((2, 15), "windows") == ("cu130", "cu132")
    assert upstream.torch_index.variants((2, 13), "linux") == ("cu126", "cu130", "cu132")
    assert upstream.torch_index.absent == ("cu128", "cu129", "cu131", "cu133", "cu134")
    assert max(upstream.cuda_action.installable["windows"]) == (13, 2, 0)


def test_the_action_pin_and_its_tables_are_read_from_the_real_files() -> None:
    # wheels.yml installs CUDA from NVIDIA's archives now (`dswheels cuda install`): no action to read there
    assert find_action_pin((ROOT / ".github" / "workflows" / "wheels.yml").read_text(encoding="utf-8")) is None
    pin = recorded_action_pin()
    assert pin.method == "network"
    assert len(pin.commit) == 40
    windows = (RECORDED / "cuda-toolkit" / pin.commit / "src" / "links" / "windows-links.ts").read_text()
    local = table_versions(windows, "cudaVersionToURL")
    network = table_versions(windows, "cudaVersionToNetworkUrl")
    assert (12, 6, 3) in network
    assert (13, 2, 0) in local
    with pytest.raises(ValueError, match="no table"):
        table_versions(windows, "cudaVersionToNothing")


def test_cuda_pins_are_read_from_requirements() -> None:
    assert parse_cuda_pin(['cuda-toolkit[cublas]==13.0.3; platform_system == "Linux"']) == ("13.0.3", True)
    assert parse_cuda_pin(['nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"']) == ("12.8", False)
    assert parse_cuda_pin(["filelock", "sympy>=1.13.3"]) is None


def test_the_shipped_facts_against_the_recorded_sources() -> None:
    # the shipped workflow installs CUDA from NVIDIA's archives: no action's tables are read
    report = check_facts(SHIPPED, recorded_upstream(with_action=False), today=TODAY)
    found = _by_entry(report)
    # every install pin is at least the toolkit a torch release pins (13.0.3, 13.2.2): nothing to raise
    assert not [e for e in found if e.startswith("cuda.") and e.endswith(".install")]
    # the (derived) per-variant pages agree with 2.15's corrected variants, which settles them
    assert found["torch.2.15.variants"][0][0] is Kind.CONFIRMED
    assert not [e for e in found if e.startswith(("torch.2.13", "torch.2.14", "deepspeed"))]
    # every inferred entry is accounted for, each unsettled one with compat.yml's reason
    unsettled = {f.entry: f.message for f in report.findings if f.kind is Kind.UNSETTLED}
    reasons = {label: why for _path, label, why in inferred_entries(yaml.safe_load(SHIPPED))}
    assert set(unsettled) == set(reasons) - {"torch.2.15"}
    # the finding carries compat.yml's own `unsettled:` reason, not the fallback for an entry without one
    assert all(reasons[entry] and reasons[entry] in why for entry, why in unsettled.items())


def test_a_planted_stale_entry_a_missing_variant_and_a_new_release_are_reported() -> None:
    report = check_facts(PLANTED, recorded_upstream(), today=TODAY)
    found = _by_entry(report)
    assert found["torch.2.14.latest"] == [(Kind.DISAGREES, "the newest 2.14 release is 2.14.1, compat.yml says 2.14.0")]
    kinds = dict(found["torch.2.14.variants.linux"])
    assert Kind.NEW in kinds
    assert "cu132" in kinds[Kind.NEW]
    ((kind, message),) = found["torch.2.15.variants.linux"]
    assert kind is Kind.REFUTED
    assert "no cu126 wheels for linux" in message
    news = [m for k, m in found["deepspeed.releases"] if k is Kind.NEW]
    assert [m.split(" is on")[0] for m in news] == ["DeepSpeed 0.19.8"]
    assert report.new_deepspeed == ("0.19.8",)
    assert report.placeable_deepspeed == ()  # its sdist was not read here
    assert report.drift


def test_write_makes_the_planted_facts_agree_and_keeps_everything_else() -> None:
    report = check_facts(PLANTED, recorded_upstream(), today=TODAY)
    after = yaml.safe_load(report.after)
    compat = parse_compat(after)
    assert compat.torch[(2, 14)].latest == "2.14.1"
    assert [v.name for v in compat.torch[(2, 14)].variants["linux"]] == ["cu126", "cu130", "cu132"]
    assert [v.name for v in compat.torch[(2, 15)].variants["linux"]] == ["cu130", "cu132"]
    assert not compat.torch[(2, 15)].inferred
    assert "variants read from download.pytorch.org" in compat.torch[(2, 15)].source
    assert "Corrected 2026-11-24" in compat.torch[(2, 15)].source  # the earlier note is kept
    assert format_version(compat.deepspeed_releases[-1]) == "0.19.8"
    assert after["collected"] == TODAY
    # 2.13 still shares its Python list with 2.12 (an untouched alias), comments are all there
    assert "python: *py_2_12" in report.after
    assert [line for line in PLANTED.splitlines() if line.lstrip().startswith("#")] == [
        line for line in report.after.splitlines() if line.lstrip().startswith("#")
    ]
    again = check_facts(report.after, recorded_upstream(), today=TODAY)
    # what is left is for a person: CUDA pins the pinned action cannot install, toolkits without an entry
    assert not [f for f in again.findings if f.kind.drifts and not f.entry.startswith("cuda.")]
    assert all(f.person for f in again.findings if f.kind.drifts)


def test_sources_left_out_are_reported_unchecked_and_change_nothing_they_would_settle() -> None:
    upstream = replace(recorded_upstream(with_index=False), skipped={"torch-index": "left out (--skip)"})
    report = check_facts(PLANTED, upstream, today=TODAY)
    found = _by_entry(report)
    assert found["torch-index"] == [(Kind.UNCHECKED, "left out (--skip)")]
    assert not [e for e in found if ".variants" in e]
    assert yaml.safe_load(report.after)["torch"]["2.15"]["variants"]["linux"] == ["cu126", "cu130", "cu132"]


def test_the_report_renders_for_people_and_for_the_workflow() -> None:
    report = check_facts(PLANTED, recorded_upstream(), today=TODAY)
    diff = render_diff(report)
    assert diff.startswith("--- a/dswheels/compat.yml\n+++ b/dswheels/compat.yml\n")
    assert '-    latest: "2.14.0"' in diff
    assert '+    latest: "2.14.1"' in diff
    text = render_text(report)
    assert "Stale: compat.yml disagrees with its sources" in text
    assert "[--write fixes it]" in text
    markdown = render_markdown(report, diff=diff)
    assert "```diff" in markdown
    assert "a person decides" in markdown
    data = yaml.safe_load(render_json(report, diff=diff))
    assert data["schema"] == "dswheels.facts-report/1"
    assert data["drift"] is True
    assert data["new_deepspeed"] == ["0.19.8"]
    assert data["diff"] == diff


def test_once_the_action_can_install_torchs_pin_write_raises_install() -> None:
    # the tables of a newer action release (Jimver/cuda-toolkit#445 added 13.0.3 and 13.2.2) on top of
    # the recorded ones: what `--write` does after the pin in wheels.yml is bumped
    upstream = recorded_upstream()
    assert upstream.cuda_action is not None
    newer = {os: (*versions, (13, 0, 3), (13, 2, 2)) for os, versions in upstream.cuda_action.installable.items()}
    before = plant_unpinned(Edit("set", ("cuda", "13.2", "install"), '"13.2.0"'))  # compat.yml as it was
    report = check_facts(
        before, replace(upstream, cuda_action=replace(upstream.cuda_action, installable=newer)), today=TODAY
    )
    found = {f.entry: f for f in report.findings}
    assert found["cuda.13.2.install"].edits
    assert not found["cuda.13.2.install"].person
    assert parse_compat(yaml.safe_load(report.after)).cuda[(13, 2)].install == "13.2.2"


def test_an_install_the_action_cannot_do_moves_to_the_newest_patch_it_can() -> None:
    planted = plant_unpinned(Edit("set", ("cuda", "12.6", "install"), '"12.6.9"'))
    report = check_facts(planted, recorded_upstream(), today=TODAY)
    (finding,) = [f for f in report.findings if f.entry == "cuda.12.6.install"]
    assert "cannot install 12.6.9 on linux or windows; it can install 12.6.3" in finding.message
    assert parse_compat(yaml.safe_load(report.after)).cuda[(12, 6)].install == "12.6.3"


# --- CUDA install pins against NVIDIA's releases (PyPI cuda-toolkit, recorded 2026-11-27) ---------------
# Each test plants the pins it is about, so none depends on the pins compat.yml ships today.


def _nvidia() -> CudaToolkitSeen:
    seen = recorded_upstream().cuda_toolkit
    assert seen is not None
    return seen


def _without_action(nvidia: CudaToolkitSeen | None = None) -> Upstream:
    """The recordings as a workflow that installs CUDA from NVIDIA's archives sees them (no action tables)."""
    upstream = replace(recorded_upstream(), cuda_action=None, cuda_without_action=True)
    return replace(upstream, cuda_toolkit=nvidia or upstream.cuda_toolkit)


def test_the_recorded_cuda_toolkit_releases_parse() -> None:
    nvidia = _nvidia()
    assert nvidia.newest((13, 4)) == (13, 4, 3)
    assert nvidia.first((13, 4)) == (13, 4, 1)  # 13.4.0 was never released...
    assert nvidia.prereleases[(13, 4, 0)] == ("13.4.0rc1",)  # ...only its release candidate
    assert (13, 4, 0) not in nvidia.releases
    assert nvidia.releases[(13, 5, 0)] == "2026-11-04"
    assert nvidia.newest((12, 8)) == (12, 8, 2)
    assert not nvidia.knows((11, 7))  # PyPI's cuda-toolkit starts at 11.8
    assert nvidia.knows((11, 8))


def test_each_install_pin_is_compared_with_the_newest_patch_nvidia_published() -> None:
    planted = plant_unpinned(
        Edit("set", ("cuda", "12.8", "install"), '"12.8.1"'),  # a patch behind
        Edit("set", ("cuda", "13.3", "install"), '"13.3.1"'),  # the newest: nothing to say
        Edit("set", ("cuda", "13.4", "install"), '"13.4.0"'),  # only ever a release candidate
        Edit("set", ("cuda", "12.6", "install"), '"12.6.9"'),  # never published
    )
    report = check_facts(planted, _without_action(), today=TODAY)
    found = {f.entry: f for f in report.findings}
    assert "cuda.13.3.install" not in found
    stale = found["cuda.12.8.install"]
    assert stale.kind is Kind.DISAGREES
    assert "the newest CUDA 12.8 release is 12.8.2 (2026-04-14)" in stale.message
    assert stale.source.startswith("NVIDIA's releases")
    pre = found["cuda.13.4.install"].message
    assert "NVIDIA published 13.4.0 only as a pre-release (13.4.0rc1)" in pre
    assert "the newest CUDA 13.4 release is 13.4.3" in pre
    assert "NVIDIA published 12.6.9 never" in found["cuda.12.6.install"].message
    # without the action, every published release installs: --write proposes each edit
    assert all(found[e].edits and not found[e].person for e in ("cuda.12.8.install", "cuda.13.4.install"))
    after = parse_compat(yaml.safe_load(report.after)).cuda
    assert (after[(12, 8)].install, after[(13, 4)].install, after[(12, 6)].install) == ("12.8.2", "13.4.3", "12.6.3")
    assert after[(13, 3)].install == "13.3.1"
    assert "PyPI's cuda-toolkit lists no CUDA 11.7 release" in "\n".join(report.notes)


def test_without_the_installer_read_a_person_checks_before_install_is_raised() -> None:
    planted = plant(Edit("set", ("cuda", "12.8", "install"), '"12.8.1"'))
    upstream = replace(recorded_upstream(), cuda_action=None, skipped={"cuda-action": "left out (--skip)"})
    (finding,) = [f for f in check_facts(planted, upstream, today=TODAY).findings if f.entry == "cuda.12.8.install"]
    assert not finding.edits
    assert "whether the CUDA-install action can install 12.8.2 was not checked" in finding.person


def test_with_the_action_read_the_pin_moves_only_as_far_as_its_tables_go() -> None:
    planted = plant(Edit("set", ("cuda", "12.8", "install"), '"12.8.1"'))
    upstream = recorded_upstream()
    assert upstream.cuda_action is not None
    assert (12, 8, 2) not in upstream.cuda_action.installable["linux"]  # the recorded v0.2.35 tables
    (finding,) = [f for f in check_facts(planted, upstream, today=TODAY).findings if f.entry == "cuda.12.8.install"]
    assert not finding.edits
    assert "knows CUDA 12.8 only up to 12.8.1" in finding.message
    assert "a release that lists 12.8.2" in finding.person
    tables = {os: (*v, (12, 8, 2)) for os, v in upstream.cuda_action.installable.items()}
    newer = replace(upstream, cuda_action=replace(upstream.cuda_action, installable=tables))
    report = check_facts(planted, newer, today=TODAY)
    assert parse_compat(yaml.safe_load(report.after)).cuda[(12, 8)].install == "12.8.2"


def test_new_toolkits_are_proposed_and_pre_releases_are_only_noted() -> None:
    nvidia = _nvidia()
    later = replace(
        nvidia,
        releases={**nvidia.releases, (14, 0, 0): "2027-03-01", (14, 0, 1): "2027-04-01"},
        prereleases={**nvidia.prereleases, (14, 1, 0): ("14.1.0rc1", "14.1.0rc2")},
    )
    report = check_facts(SHIPPED, _without_action(later), today=TODAY)
    found = {f.entry: f for f in report.findings}
    new = found["cuda.14.0"]
    assert new.kind is Kind.NEW
    assert "NVIDIA released CUDA 14.0.0 on 2027-03-01 (newest 14.0.1)" in new.message
    assert "sm list" in new.person
    assert not new.edits  # its sm list and host compilers are not read anywhere: a person writes the entry
    assert "cuda.14.1" not in found
    assert "CUDA 14.1.0 is out only as a pre-release (14.1.0rc1, 14.1.0rc2)" in "\n".join(report.notes)


def test_a_toolkit_nvidia_released_only_as_a_pre_release_is_left_to_a_person() -> None:
    nvidia = _nvidia()
    only_rc = replace(nvidia, releases={v: d for v, d in nvidia.releases.items() if v[:2] != (13, 4)})
    planted = plant(Edit("set", ("cuda", "13.4", "install"), '"13.4.0"'))
    report = check_facts(planted, _without_action(only_rc), today=TODAY)
    (finding,) = [f for f in report.findings if f.entry == "cuda.13.4.install"]
    assert not finding.edits
    assert "NVIDIA has released no CUDA 13.4 yet (only 13.4.0rc1)" in finding.person


def test_a_source_that_could_not_be_read_is_named_and_its_facts_stay_unchecked() -> None:
    why = "cannot reach https://download.pytorch.org/whl/cu130/torch/: ConnectionError"
    upstream = replace(recorded_upstream(with_index=False), unreachable={"torch-index": why})
    report = check_facts(PLANTED, upstream, today=TODAY)
    assert _by_entry(report)["torch-index"] == [(Kind.UNCHECKED, f"could not be read: {why}")]
    assert not [f for f in report.findings if ".variants" in f.entry]
    assert report.unreachable == {"torch-index": why}
    assert f"FAILED  torch-index: {why}" in render_text(report)
    assert "could not read 1 source(s): torch-index" in render_text(report)
    assert json.loads(render_json(report, diff=""))["unreachable"] == {"torch-index": why}
    assert f"Could not read: torch-index: {why}" in render_markdown(report, diff="")


def test_an_entry_inferred_for_another_key_is_not_settled_by_its_variants() -> None:
    # a new minor's entry as `--write` adds it: only its cxx_std is a guess; the index confirming its
    # variants the next day must leave it inferred
    planted = plant(Edit("set", ("torch", "2.15", "unsettled"), '"cxx_std: torch 2.14\'s; not read"'))
    report = check_facts(planted, recorded_upstream(), today=TODAY)
    found = _by_entry(report)
    assert "torch.2.15.variants" not in found
    assert found["torch.2.15"] == [(Kind.UNSETTLED, "cxx_std: torch 2.14's; not read")]
    assert parse_compat(yaml.safe_load(report.after)).torch[(2, 15)].inferred


def test_a_pin_installed_from_a_pinned_redistrib_json_is_not_raised_alone() -> None:
    # the toolkit is installed from NVIDIA's redistrib_12.8.1.json, pinned by its sha256: raising `install`
    # alone would check the new release's archives against the old release's JSON
    planted = plant(
        Edit("set", ("cuda", "12.8", "install"), '"12.8.1"'),
        Edit("add", ("cuda", "12.8"), '"' + "ab" * 32 + '"', key="redist_sha256"),
    )
    report = check_facts(planted, _without_action(), today=TODAY)
    (finding,) = [f for f in report.findings if f.entry == "cuda.12.8.install"]
    assert not finding.edits
    assert "record NVIDIA's redistrib_12.8.2.json" in finding.person
    assert parse_compat(yaml.safe_load(report.after)).cuda[(12, 8)].install == "12.8.1"
