"""Releases that are not out yet, derived from the recordings: what the follow workflow will read.

These are **derived, not recorded** (tests/data/upstream/README.md, "Scenarios"): each new
release is the newest recorded one with its version changed, in the shape the real one had.

- :func:`torch_release`: torch 2.16.0 as PyPI and download.pytorch.org will show it, made from
  2.15.0: PyPI's JSON gets a release ``2.16.0`` whose files are 2.15.0's with the version in
  their names and URLs changed and the upload day moved; ``info`` becomes 2.16.0's (2.15.0's
  requirements: the same cuda-toolkit pin); every per-variant page that lists 2.15.0 also
  lists the same wheels of 2.16.0. 2.15.0's own pin is then read from its METADATA (its byte
  ranges are recorded, as the older minors' are).
- :func:`deepspeed_release`: DeepSpeed 0.19.9 made from 0.19.8: the real 0.19.8 sdist with its
  top directory and version changed (``version.txt``, ``PKG-INFO``), and PyPI's JSON entry of
  0.19.8 with that file's name, URL, size and digests.

Both edit a site :func:`tests.support.upstream.assemble` laid out, and mark the JSON they
change with ``dswheels_derived``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from pathlib import Path
from urllib.parse import urljoin, urlsplit

__all__ = ["deepspeed_release", "torch_release"]

_SERVED_JSON = "http://host/pypi/{project}/json"  # how the loopback site resolves a file's relative URL


def _load(site: Path, project: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((site / "pypi" / project / "index.json").read_text(encoding="utf-8"))
    return data


def _save(site: Path, project: str, data: dict[str, object]) -> None:
    (site / "pypi" / project / "index.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _moved(files: list[dict[str, object]], like: str, new: str, day: str) -> list[dict[str, object]]:
    moved = []
    for entry in files:
        copy = dict(entry)
        for key in ("filename", "url"):
            copy[key] = str(entry[key]).replace(f"-{like}-", f"-{new}-").replace(f"-{like}.", f"-{new}.")
        for key in ("upload_time", "upload_time_iso_8601"):
            copy[key] = day + str(entry[key])[10:]
        moved.append(copy)
    return moved


def torch_release(site: Path, *, new: str = "2.16.0", like: str = "2.15.0", day: str = "2026-12-22") -> None:
    """Torch ``new`` on the site's PyPI and per-variant pages, in the shape of ``like`` (2.16.0 is planned
    for 2026-12-22: pytorch#196028)."""
    data = _load(site, "torch")
    releases = dict(data["releases"])  # type: ignore[call-overload]
    releases[new] = _moved(releases[like], like, new, day)
    info = dict(data["info"])  # type: ignore[call-overload]
    info["version"] = new
    data.update(
        releases=releases,
        info=info,
        dswheels_derived={"release": new, "from": like, "how": "tests/support/scenarios.py torch_release"},
    )
    _save(site, "torch", data)
    pattern = re.compile(rf'^(\s*<a href="[^"]*torch-){re.escape(like)}(%2B[^"]*">torch-){re.escape(like)}(\+.*)$')
    for page in (site / "whl").glob("*/torch/index.html"):
        lines = page.read_text(encoding="utf-8").splitlines()
        added = [pattern.sub(rf"\g<1>{new}\g<2>{new}\g<3>", line) for line in lines if pattern.match(line)]
        if added:
            end = max(i for i, line in enumerate(lines) if "<a " in line) + 1
            page.write_text("\n".join([*lines[:end], *added, *lines[end:]]) + "\n", encoding="utf-8")


def _renamed_sdist(real: bytes, like: str, new: str) -> bytes:
    """The sdist ``real`` (of DeepSpeed ``like``) as release ``new``: top directory and version changed."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(real), mode="r:gz") as source, tarfile.open(fileobj=out, mode="w") as target:
        for member in source:
            handle = source.extractfile(member) if member.isfile() else None
            data = handle.read() if handle is not None else None
            top, sep, rest = member.name.partition("/")
            if top == f"deepspeed-{like}":
                member.name = f"deepspeed-{new}{sep}{rest}"
            if data is not None and rest in ("version.txt", "PKG-INFO"):
                data = data.replace(like.encode(), new.encode())
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    return gzip.compress(out.getvalue(), mtime=0)


def deepspeed_release(site: Path, *, new: str = "0.19.9", like: str = "0.19.8", day: str = "2026-12-08") -> None:
    """DeepSpeed ``new`` on the site's PyPI, its sdist that of ``like`` with the version changed."""
    data = _load(site, "deepspeed")
    releases = dict(data["releases"])  # type: ignore[call-overload]
    (entry,) = _moved([f for f in releases[like] if f["packagetype"] == "sdist"], like, new, day)
    served = site / urlsplit(urljoin(_SERVED_JSON.format(project="deepspeed"), str(releases[like][0]["url"]))).path[1:]
    sdist = _renamed_sdist(served.read_bytes(), like, new)
    target = site / urlsplit(urljoin(_SERVED_JSON.format(project="deepspeed"), str(entry["url"]))).path[1:]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(sdist)
    entry.update(
        size=len(sdist),
        md5_digest=hashlib.md5(sdist).hexdigest(),  # noqa: S324 - PyPI's own field
        digests={
            "blake2b_256": hashlib.blake2b(sdist, digest_size=32).hexdigest(),
            "md5": hashlib.md5(sdist).hexdigest(),  # noqa: S324 - PyPI's own field
            "sha256": hashlib.sha256(sdist).hexdigest(),
        },
    )
    releases[new] = [entry]
    info = dict(data["info"])  # type: ignore[call-overload]
    info["version"] = new
    data.update(
        releases=releases,
        info=info,
        dswheels_derived={"release": new, "from": like, "how": "tests/support/scenarios.py deepspeed_release"},
    )
    _save(site, "deepspeed", data)
