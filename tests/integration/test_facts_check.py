"""`dswheels facts check` end to end: the real CLI against compat.yml's sources on loopback.

The sources are the recordings of tests/data/upstream/ (README.md there says where each came
from) and real DeepSpeed sdists from PyPI, served by tests/support/upstream.py. Facts are
planted in copies of the shipped compat.yml: a stale entry, a missing variant, a new release,
an op range and a rule the sdists contradict.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dswheels.facts.yaml_edit import Edit, apply_edits
from dswheels.kernel.errors import SourceError
from tests.conftest import DATA, ROOT, require
from tests.support.upstream import UpstreamServer, assemble, urls

pytestmark = pytest.mark.integration

SHIPPED = (ROOT / "dswheels" / "compat.yml").read_text(encoding="utf-8")
GOLDEN_DIFF = DATA / "upstream" / "planted-write.diff"
EPOCH = 1_796_083_200  # 2026-12-01


@pytest.fixture(scope="module")
def upstream(dswheels_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamServer]:
    error = ""
    root = tmp_path_factory.mktemp("upstream") / "site"
    try:
        assemble(root, dswheels_cache / "sources")
    except SourceError as exc:
        error = exc.message
    require(not error, f"the real DeepSpeed sdists come from PyPI: {error}")
    with UpstreamServer(root) as server:
        yield server


def _check(tmp_path: Path, compat: str, *args: str, base: list[str]) -> tuple[subprocess.CompletedProcess[str], Path]:
    path = tmp_path / "compat.yml"
    path.write_text(compat, encoding="utf-8")
    env = {
        "PATH": "/usr/bin:/bin",
        "DSWHEELS_CACHE": str(tmp_path / "cache"),  # the sdists are fetched through the loopback server
        "HOME": str(tmp_path),
        "SOURCE_DATE_EPOCH": str(EPOCH),  # the date --write stamps into the file
    }
    proc = subprocess.run(
        [sys.executable, "-m", "dswheels", "facts", "check", "--compat", str(path), *base, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
        timeout=600,
    )
    return proc, path


def _findings(report: Path) -> dict[str, list[dict[str, object]]]:
    found: dict[str, list[dict[str, object]]] = {}
    for finding in json.loads(report.read_text(encoding="utf-8"))["findings"]:
        found.setdefault(str(finding["entry"]), []).append(finding)
    return found


def test_the_shipped_facts_are_checked_against_every_source(upstream: UpstreamServer, tmp_path: Path) -> None:
    proc, _path = _check(tmp_path, SHIPPED, "--json", str(tmp_path / "r.json"), base=upstream.args)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert set(data["read"]) == {
        "pypi-deepspeed",
        "pypi-torch",
        "pypi-cuda-toolkit",
        "torch-index",
        "cuda-action",
        "deepspeed-sdists",
        "runner-images",
    }
    assert data["unreachable"] == {}
    assert data["read"]["deepspeed-sdists"] == "0.19.4, 0.19.5, 0.19.6, 0.19.7, 0.19.8"
    found = _findings(tmp_path / "r.json")
    # torch 2.14.1's pin (13.0.3) came from its METADATA, read through range requests of the wheel, and
    # compat.yml installs it: nothing to raise
    assert not [e for e in found if e.startswith("cuda.") and e.endswith(".install")]
    wheel_reads = [p for p in upstream.paths if p.endswith("torch-2.14.1-cp314-cp314-manylinux_2_28_x86_64.whl")]
    assert len(wheel_reads) == 2  # the end of the zip, then METADATA: no whole wheel
    # the sdists agree with the ops, the whitelist and both checked rules: nothing to report there
    assert not [e for e in found if e.startswith(("ops.", "rules.deepspeed-torch", "deepspeed."))]
    assert "rules.deepspeed-nvcc13-cxx20" not in found  # settled: no longer inferred
    # the runner images' ends agree with GitHub's announcements (actions/runner-images#14254)
    assert not [e for e in found if e.startswith("runner_images.") and e.endswith(".ends")]
    assert "/repos/actions/runner-images/issues" in upstream.paths


def test_the_runner_images_ends_are_checked_against_githubs_announcements(
    upstream: UpstreamServer, tmp_path: Path
) -> None:
    """A planted end date disagrees with #14254; an image without its announced end is new."""
    moved = SHIPPED.replace('unsupported: "2027-04-17"', 'unsupported: "2027-05-17"', 1)
    assert moved != SHIPPED
    proc, _ = _check(tmp_path, moved, "--json", str(tmp_path / "r.json"), base=upstream.args)
    assert proc.returncode == 0, proc.stderr
    (finding,) = _findings(tmp_path / "r.json")["runner_images.ubuntu-22.04.ends"]
    assert finding["kind"] == "disagrees"
    assert "actions/runner-images#14254 says deprecation 2026-09-17, brownouts 2027-03-23, 2027-03-30, " in str(
        finding["message"]
    )
    assert "unsupported from 2027-04-17; compat.yml records " in str(finding["message"])
    start = SHIPPED.index("    ends:\n      deprecated:")
    end = SHIPPED.index("announcement:", start)
    end = SHIPPED.index("\n", end) + 1
    forgotten = SHIPPED[:start] + SHIPPED[end:]
    proc, _ = _check(tmp_path, forgotten, "--json", str(tmp_path / "r2.json"), base=upstream.args)
    assert proc.returncode == 0, proc.stderr
    (finding,) = _findings(tmp_path / "r2.json")["runner_images.ubuntu-22.04.ends"]
    assert finding["kind"] == "new"
    assert "records none: add `ends`" in str(finding["message"])


def test_sdists_refute_a_planted_op_range_and_rule(upstream: UpstreamServer, tmp_path: Path) -> None:
    rules = SHIPPED.split("\nrules:\n", 1)[1]
    index = [line.strip() for line in rules.splitlines() if line.startswith("  - id: ")].index(
        "- id: deepspeed-nvcc13-cxx20"
    )
    planted = apply_edits(
        SHIPPED,
        [
            Edit("set", ("ops", "cuda", "pin_memory", "versions"), '">=0.19.7"'),
            Edit("set", ("rules", index, "require", "deepspeed"), '">=0.19.6"'),
        ],
    )
    proc, _path = _check(tmp_path, planted, "--json", str(tmp_path / "r.json"), base=upstream.args)
    assert proc.returncode == 0, proc.stderr
    found = _findings(tmp_path / "r.json")
    messages = [str(f["message"]) for f in found["ops.cuda.pin_memory.versions"]]
    assert any("DeepSpeed 0.19.5 defines pin_memory" in m and ">=0.19.7 leaves 0.19.5 out" in m for m in messages)
    (rule,) = found["rules.deepspeed-nvcc13-cxx20"]
    assert rule["kind"] == "disagrees"
    assert "DeepSpeed 0.19.6 passes -std=c++17 yet the rule admits it" in str(rule["message"])


PLANTED = apply_edits(
    SHIPPED,
    [
        Edit("set", ("torch", "2.14", "latest"), '"2.14.0"'),  # stale
        Edit("set", ("torch", "2.14", "variants"), "{linux: [cu126, cu130], windows: [cu126, cu130, cu132]}"),
        Edit("set", ("torch", "2.15", "variants", "windows"), "[cu126, cu130, cu132]"),  # what was shipped
        Edit("set", ("deepspeed", "releases"), '["0.19.6", "0.19.7"]'),  # 0.19.8 not known yet
    ],
)


def test_write_shows_the_diff_then_makes_it(upstream: UpstreamServer, tmp_path: Path, update_golden: bool) -> None:
    proc, path = _check(tmp_path, PLANTED, "--write", "--json", str(tmp_path / "r.json"), base=upstream.args)
    assert proc.returncode == 0, proc.stderr
    diff = proc.stdout[proc.stdout.index("--- a/") : proc.stdout.index("\nwrote ")]
    normalized = diff.replace(str(path), "compat.yml")
    if update_golden:
        GOLDEN_DIFF.write_text(normalized, encoding="utf-8")
    assert normalized == GOLDEN_DIFF.read_text(encoding="utf-8")
    assert '+collected: "2026-12-01"' in normalized
    assert proc.stdout.index("--- a/") < proc.stdout.index(f"wrote {path}")
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["new_deepspeed"] == ["0.19.8"]
    assert data["placeable_deepspeed"] == ["0.19.8"]  # its sdist was read and agrees with the facts
    # the file now says what the sources say: a second check finds nothing it can write
    again, _ = _check(tmp_path, path.read_text(encoding="utf-8"), "--diff", base=upstream.args)
    assert again.returncode == 0, again.stderr
    assert "--- a/" not in again.stdout


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_every_unreachable_source_is_named_in_one_run_and_the_rest_is_checked(
    upstream: UpstreamServer, tmp_path: Path
) -> None:
    # download.pytorch.org and GitHub cannot be reached: both at a port nothing listens on (refused)
    dead = f"http://127.0.0.1:{_closed_port()}"
    # (the runner images' announcements, GitHub's API, stay on the recordings' host)
    workflow = str(_action_workflow(tmp_path / "wheels.yml"))
    base = [*upstream.args[:2], *urls(dead)[2:6], *upstream.args[6:8], "--workflow", workflow]
    started = time.monotonic()
    proc, path = _check(tmp_path, PLANTED, "--write", "--json", str(tmp_path / "r.json"), base=base)
    took = time.monotonic() - started
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert f"torch-index: cannot reach {dead}/whl/" in proc.stderr
    assert f"cuda-action: cannot reach {dead}/Jimver/cuda-toolkit/" in proc.stderr
    assert "--skip torch-index --skip cuda-action" in proc.stderr
    # what could be checked was checked, and the report says so
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert set(data["read"]) == {
        "pypi-deepspeed",
        "pypi-torch",
        "pypi-cuda-toolkit",
        "deepspeed-sdists",
        "runner-images",
    }
    assert set(data["unreachable"]) == {"torch-index", "cuda-action"}
    found = _findings(tmp_path / "r.json")
    assert found["torch.2.14.latest"][0]["kind"] == "disagrees"  # pypi-torch's finding, from this run
    assert {str(f["kind"]) for f in found["torch-index"] + found["cuda-action"]} == {"unchecked"}
    assert "FAILED  torch-index" in proc.stdout
    # nothing is written while a source is missing (--skip it to write what the others settle)
    assert "not written: torch-index, cuda-action could not be read" in proc.stdout
    assert path.read_text(encoding="utf-8") == PLANTED
    # left out on purpose, the rest is checked and the index's facts are reported unchecked
    started = time.monotonic()
    skipped, _ = _check(tmp_path, PLANTED, "--skip", "torch-index", "--skip", "cuda-action", base=base)
    assert skipped.returncode == 0, skipped.stderr
    assert "Not checked (2):\n  - torch-index: left out (--skip)" in skipped.stdout
    # a refused connection costs seconds, not the ~30 s of retries a download gets (~60 s for these two)
    refused = took - (time.monotonic() - started)
    assert refused < 15, f"the two unreachable sources cost {refused:.0f} s"


def _action_workflow(path: Path) -> Path:
    """A workflow that installs CUDA with the action whose tables are recorded (v0.2.35): the cuda-action
    source, on GitHub, whatever the shipped wheels.yml installs CUDA with."""
    (commit,) = [p.name for p in (DATA / "upstream" / "cuda-toolkit").iterdir()]
    path.parent.mkdir(parents=True, exist_ok=True)
    step = f"      - uses: Jimver/cuda-toolkit@{commit} # v0.2.35\n        with:\n          method: network\n"
    path.write_text(f"jobs:\n  build:\n    steps:\n{step}", encoding="utf-8")
    return path


def _repository(root: Path) -> Path:
    """A clone's layout: the facts file and the workflow that installs CUDA, at their usual paths."""
    (root / "dswheels").mkdir(parents=True)
    (root / "dswheels" / "compat.yml").write_text(SHIPPED, encoding="utf-8")
    _action_workflow(root / ".github" / "workflows" / "wheels.yml")
    (root / "docs").mkdir()
    return root


def test_the_workflow_is_found_from_any_directory_of_the_repository(upstream: UpstreamServer, tmp_path: Path) -> None:
    clone = _repository(tmp_path / "clone")
    others = [
        a for name in ("pypi-deepspeed", "pypi-torch", "torch-index", "deepspeed-sdists") for a in ("--skip", name)
    ]
    env = {"PATH": "/usr/bin:/bin", "DSWHEELS_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    runs = {
        "from a subdirectory": (clone / "docs", tmp_path / "elsewhere.yml"),  # facts file outside any clone
        "from outside, with the clone's facts": (tmp_path, clone / "dswheels" / "compat.yml"),
    }
    (tmp_path / "elsewhere.yml").write_text(SHIPPED, encoding="utf-8")
    for what, (cwd, compat) in runs.items():
        proc = subprocess.run(
            [sys.executable, "-m", "dswheels", "facts", "check", "--compat", str(compat), *upstream.args, *others],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            check=False,
            timeout=300,
        )
        assert proc.returncode == 0, f"{what}: {proc.stderr}"
        assert "read    cuda-action: Jimver/cuda-toolkit@" in proc.stdout, what


def test_without_the_cuda_action_write_raises_a_pin_to_nvidias_newest(upstream: UpstreamServer, tmp_path: Path) -> None:
    # wheels.yml installing CUDA from NVIDIA's archives: no action tables limit what can be installed
    clone = _repository(tmp_path / "clone")
    workflow = clone / ".github" / "workflows" / "wheels.yml"
    workflow.write_text("jobs:\n  build:\n    steps:\n      - run: dswheels cuda install\n", encoding="utf-8")
    compat = clone / "dswheels" / "compat.yml"
    compat.write_text(apply_edits(SHIPPED, [Edit("set", ("cuda", "12.8", "install"), '"12.8.1"')]), encoding="utf-8")
    leave_out = ("pypi-deepspeed", "pypi-torch", "torch-index", "deepspeed-sdists")
    args = ["facts", "check", "--compat", str(compat), "--json", str(tmp_path / "r.json"), *upstream.args]
    proc = subprocess.run(
        [sys.executable, "-m", "dswheels", *args, *(arg for name in leave_out for arg in ("--skip", name))],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "DSWHEELS_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)},
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "installs CUDA without Jimver/cuda-toolkit" in proc.stdout
    (pin,) = _findings(tmp_path / "r.json")["cuda.12.8.install"]
    assert "the newest CUDA 12.8 release is 12.8.2" in str(pin["message"])
    assert pin["written"] is True
    assert not pin["person"]
