"""Record the small, real subsets of compat.yml's sources that the facts-check tests serve.

    python scripts/record_upstream.py                     # PyPI + torch METADATA ranges + action tables
    python scripts/record_upstream.py --torch-index live  # also the real download.pytorch.org pages
    (nox -s record_upstream -- ...)

Writes tests/data/upstream/ (its README says where each file came from):

- ``pypi/<project>/json``: https://pypi.org/pypi/<project>/json, trimmed: ``info`` keeps only
  what dswheels reads, ``releases`` keeps DeepSpeed >= 0.14.0 (sdists only), torch >= 2.13
  (Linux x86-64 and Windows wheels only) and every ``cuda-toolkit`` release (NVIDIA's
  meta-package: one version per toolkit release, pre-releases included). File entries are
  kept byte for byte otherwise.
- ``ranges/<wheel>.gz``: the exact byte ranges dswheels reads from a torch wheel to get its
  METADATA (the end of the zip and the METADATA entry), for each minor's newest patch (the
  newest release's too: its requirements come from the JSON's ``info`` until a newer minor is
  out, as in the torch 2.16 scenario of tests/support/scenarios.py): gzip of a JSON line
  ``{"from": url, "size": bytes, "segments": [[start, length], ...]}`` and then those bytes.
- ``cuda-toolkit/<commit>/src/links/<os>-links.ts``: Jimver/cuda-toolkit's version tables at
  the commit .github/workflows/wheels.yml pins, from raw.githubusercontent.com or, with
  ``--action-repo PATH``, from a local clone (``git show <commit>:<path>``).
- ``torch-index/<variant>/torch/index.html``: with ``--torch-index live``, the real pages of
  download.pytorch.org, trimmed to torch >= 2.13. With ``--torch-index derive`` (default; the
  dev machine cannot reach download.pytorch.org) they are built in the page format of
  pytorch/test-infra s3_management/manage.py (``to_simple_package_html``) from PyPI's real
  file list of each release, the local label ``+<variant>`` added as PyTorch names its wheels,
  for the variants each release has according to ``DERIVED_VARIANTS`` below (PyTorch's
  release matrices and notices); no ``#sha256=`` fragment, as those digests are not known here.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dswheels.facts.cuda_action import ACTION, find_action_pin  # noqa: E402
from dswheels.facts.pypi_json import linux_wheel, torch_minors, wheel_platform  # noqa: E402
from dswheels.host import wheel_metadata  # noqa: E402
from dswheels.kernel.pypi_project import read_pypi_project  # noqa: E402

OUT = ROOT / "tests" / "data" / "upstream"
PYPI = "https://pypi.org/pypi/{project}/json"
TORCH_INDEX = "https://download.pytorch.org/whl/{variant}/torch/"
RAW = "https://raw.githubusercontent.com/{action}/{commit}/src/links/{os}-links.ts"
TORCH_FROM = (2, 13)
DEEPSPEED_FROM = (0, 14, 0)
VARIANTS = ("cu126", "cu128", "cu129", "cu130", "cu131", "cu132", "cu133", "cu134")
# For --torch-index derive: the CUDA variants each release has on download.pytorch.org, both OSes.
# 2.13-2.14: the release list 12.6/13.0/13.2 of pytorch/test-infra's generate_binary_build_matrix.py
# (commit 61a7757, "Update binary build matrix for release 2.14", #8497); 2.15: 12.6 removed
# (pytorch/test-infra#8739, the 2026-09-04 dev-discuss notice), 13.4 only in the test channel.
DERIVED_VARIANTS = {
    "2.13": ("cu126", "cu130", "cu132"),
    "2.14": ("cu126", "cu130", "cu132"),
    "2.15": ("cu130", "cu132"),
}


def _version(text: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in text.split("."))
    except ValueError:
        return None


CUDA_TOOLKIT_FILE_KEYS = ("filename", "upload_time_iso_8601", "yanked")


def _trim(project: str, data: dict[str, object]) -> dict[str, object]:
    info = data["info"]
    if not isinstance(info, dict):
        raise SystemExit(f"{project}: PyPI's JSON has no info object")
    # cuda-toolkit: the versions are the fact (its info's requires_dist, on the dev machine's mirror, was
    # another release's than info.version says: the wheels' own METADATA is where a pin is read)
    wanted = ["name", "version"] + ([] if project == "cuda-toolkit" else ["requires_python", "requires_dist"])
    keep_info = {k: info.get(k) for k in wanted}
    releases: dict[str, object] = {}
    for name, files in dict(data["releases"]).items():  # type: ignore[call-overload]
        if project == "cuda-toolkit":  # every release, pre-releases included: the check must see them
            releases[name] = [{k: f[k] for k in CUDA_TOOLKIT_FILE_KEYS} for f in files]
            continue
        version = _version(name)
        if version is None:
            continue
        if project == "deepspeed" and version >= DEEPSPEED_FROM:
            releases[name] = [f for f in files if f["packagetype"] == "sdist"]
        elif project == "torch" and version[:2] >= TORCH_FROM:
            releases[name] = [f for f in files if wheel_platform(f["filename"]) is not None]
    if project == "cuda-toolkit":  # every release, pre-releases too: what `facts check` flags
        releases = dict(data["releases"])  # type: ignore[call-overload]
    return {"info": keep_info, "releases": releases, "dswheels_recorded": {"from": PYPI.format(project=project)}}


class _Recorder(requests.Session):
    """A session that keeps the bytes of every range answer it gets (what the reader asked for)."""

    def __init__(self) -> None:
        super().__init__()
        self.segments: list[tuple[int, bytes]] = []
        self.size = 0

    def get(self, url: str | bytes, **kwargs: object) -> requests.Response:  # type: ignore[override]
        response = super().get(url, **kwargs)  # type: ignore[arg-type]
        content_range = response.headers.get("Content-Range", "")
        if response.status_code == 206 and content_range.startswith("bytes "):
            span, _, total = content_range.removeprefix("bytes ").partition("/")
            self.segments.append((int(span.split("-")[0]), response.content))
            self.size = int(total)
        return response


PROJECTS = ("deepspeed", "torch", "cuda-toolkit")


def record_pypi(out: Path, projects: tuple[str, ...] = PROJECTS) -> dict[str, object]:
    torch: dict[str, object] = {}
    for project in projects:
        url = PYPI.format(project=project)
        print(f"GET {url}")
        data = requests.get(url, timeout=120).json()
        trimmed = _trim(project, data)
        target = out / "pypi" / project / "json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(trimmed, indent=1) + "\n", encoding="utf-8")
        if project == "torch":
            torch = trimmed
    return torch


def record_ranges(out: Path, torch: dict[str, object]) -> None:
    project = read_pypi_project(torch, json_url=PYPI.format(project="torch"))
    for seen in torch_minors(project).values():
        wheel = linux_wheel(project, seen.latest)
        if wheel is None:
            raise SystemExit(f"torch {seen.latest} has no Linux x86-64 wheel on PyPI")
        recorder = _Recorder()
        print(f"range-read METADATA of {wheel[0]}")
        wheel_metadata.read_wheel_metadata(recorder, wheel[1])
        header = {
            "from": wheel[1],
            "size": recorder.size,
            "segments": [[start, len(data)] for start, data in recorder.segments],
        }
        target = out / "ranges" / f"{wheel[0]}.gz"
        target.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(header).encode() + b"\n" + b"".join(data for _start, data in recorder.segments)
        target.write_bytes(gzip.compress(body, mtime=0))


def record_action(out: Path, repo: Path | None) -> None:
    pin = find_action_pin((ROOT / ".github" / "workflows" / "wheels.yml").read_text(encoding="utf-8"))
    if pin is None:  # wheels.yml installs CUDA from NVIDIA's archives now: the recorded tables stay as they are
        print(f"wheels.yml uses no {ACTION}: its recorded tables are kept")
        return
    for os in ("linux", "windows"):
        path = f"src/links/{os}-links.ts"
        if repo is not None:
            text = subprocess.run(
                ["git", "show", f"{pin.commit}:{path}"], cwd=repo, capture_output=True, text=True, check=True
            ).stdout
        else:
            text = requests.get(RAW.format(action=ACTION, commit=pin.commit, os=os), timeout=60).text
        target = out / "cuda-toolkit" / pin.commit / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"{ACTION}@{pin.commit} {path}: {len(text)} characters")


def _page(variant: str, names: list[str]) -> str:
    """A per-variant page as pytorch/test-infra s3_management/manage.py writes it (no checksum known)."""
    lines = ["<!DOCTYPE html>", "<html>", "  <body>", "    <h1>Links for torch</h1>"]
    lines += [f'    <a href="/whl/{variant}/{quote(name)}">{name}</a><br/>' for name in sorted(names)]
    return "\n".join([*lines, "  </body>", "</html>"]) + "\n"


def record_torch_index(out: Path, torch: dict[str, object], mode: str) -> None:
    for variant in VARIANTS:
        target = out / "torch-index" / variant / "torch" / "index.html"
        if mode == "live":
            response = requests.get(TORCH_INDEX.format(variant=variant), timeout=120)
            if response.status_code == 404:
                continue
            response.raise_for_status()
            kept = [
                line
                for line in response.text.splitlines()
                if "<a " not in line
                or ((v := _version(line.split("torch-", 1)[-1].split("%2B")[0].split("+")[0])) and v[:2] >= TORCH_FROM)
            ]
            text = "\n".join(kept) + "\n"
        else:
            names = [
                file["filename"].replace(f"torch-{release}-", f"torch-{release}+{variant}-", 1)
                for release, files in dict(torch["releases"]).items()  # type: ignore[call-overload]
                if variant in DERIVED_VARIANTS.get(".".join(release.split(".")[:2]), ())
                for file in files
            ]
            if not names:
                continue  # this variant has no page for these releases: the index answers 404
            text = _page(variant, names)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"{variant}: {text.count('<a ')} wheels ({mode})")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--action-repo", type=Path, help="a local clone of Jimver/cuda-toolkit (no GitHub access)")
    parser.add_argument("--torch-index", choices=("derive", "live"), default="derive")
    args = parser.parse_args(argv)
    torch = record_pypi(args.out)
    record_ranges(args.out, torch)
    record_action(args.out, args.action_repo)
    record_torch_index(args.out, torch, args.torch_index)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
