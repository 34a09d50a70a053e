"""The release index: how fast it is generated, and how little pip fetches from it while resolving.

1. ``dswheels index`` over 10,000 real (small) wheels published with ``dswheels publish``:
   a new site (every wheel and its .metadata linked in, every page rendered and swapped in
   atomically), and the usual run, after one more wheel is published. Target: under 5 s.
   Naive way: the same without the publish ledger, reading and hashing every wheel.
2. Bytes pip transfers while resolving ``deepspeed`` (``pip install --dry-run``) from one
   partition of our index, against the naive way: the same wheels in a plain find-links
   directory (what most wheel builders publish), where pip must download whole wheels to
   read their metadata, including one it then rejects for its Requires-Python.
   Target: ours <= 1% of the naive bytes. Wheels here carry a 20 MB payload; real
   DeepSpeed CUDA wheels are larger, which only lowers the ratio.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
import time
from pathlib import Path

from dswheels.cli import main
from dswheels.stores.ledger import LEDGER
from tests.bench.common import Result
from tests.support.installers import Installer
from tests.support.servers import StaticServer
from tests.support.wheels import interpreter_tag, write_deepspeed_wheel, write_fake_torch

GENERATION_TARGET = 5.0


def dswheels(argv: list[str]) -> int:
    """The CLI, quietly (its progress output would drown the results)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return main(argv)


def _wheels(directory: Path, count: int) -> None:
    pythons = [f"cp3{minor}" for minor in range(8, 18)]
    made = 0
    for ds in range(100):
        for torch_minor in range(25):
            for variant in ("cu126", "cu128", "cpu"):
                for python in pythons:
                    for platform in ("linux_x86_64", "win_amd64"):
                        if made == count:
                            return
                        write_deepspeed_wheel(
                            directory,
                            version=f"0.{ds // 10}.{ds % 10}",
                            variant=variant,
                            torch=f"2.{torch_minor}",
                            python=python,
                            platform=platform,
                        )
                        made += 1


def _timed(argv: list[str]) -> float:
    started = time.perf_counter()
    assert dswheels(argv) == 0, argv
    return time.perf_counter() - started


def bench_generation(root: Path, count: int) -> list[Result]:
    started = time.perf_counter()
    _wheels(root / "dist", count)
    assert dswheels(["publish", str(root / "dist"), "--dir", str(root / "published")]) == 0
    made = time.perf_counter() - started
    index = ["index", "--from", str(root / "published"), "--site-url", "https://octo.github.io/dswheels/"]
    first = _timed([*index, "--out", str(root / "site")])  # a new site: every wheel and .metadata linked in
    write_deepspeed_wheel(root / "new", version="9.9.9")
    assert dswheels(["publish", str(root / "new"), "--dir", str(root / "published")]) == 0
    again = _timed([*index, "--out", str(root / "site")])  # the usual run: one more wheel published
    (root / "published" / LEDGER).unlink()
    naive = _timed([*index, "--out", str(root / "site-naive")])  # no ledger: every wheel read and hashed
    pages = sum(1 for _ in (root / "site").rglob("index.html"))
    print(f"index: {count} wheels -> {pages} pages (making and publishing the wheels took {made:.1f} s)")
    return [
        Result(f"index: {count} wheels, new site", first, naive, target=f"< {GENERATION_TARGET:.0f} s"),
        Result(f"index: {count} wheels, after one more publish", again, naive, target=f"< {GENERATION_TARGET:.0f} s"),
    ]


def bench_resolve_bytes(root: Path, payload: int) -> list[Result]:
    here = interpreter_tag()
    dist = root / "dist"
    for version in ("0.19.6", "0.19.7", "0.19.8"):
        write_deepspeed_wheel(dist, version=version, variant="cu128", torch="2.9", payload=payload)
        write_deepspeed_wheel(
            dist,
            version=version,
            variant="cu128",
            torch="2.9",
            python="cp312" if here != "cp312" else "cp313",
            platform="win_amd64",
            payload=1024,
        )
    # the newest needs a Python nobody has: pip must learn that before it can pass it over
    write_deepspeed_wheel(
        dist, version="0.19.9", variant="cu128", torch="2.9", requires_python=">=3.99", payload=payload
    )
    torch_dir = root / "torch-index" / "torch"
    write_fake_torch(torch_dir, "2.9.1+cu128")
    plain = root / "plain"
    shutil.copytree(dist, plain)
    shutil.copy(next(torch_dir.iterdir()), plain)
    assert dswheels(["publish", str(dist), "--dir", str(root / "published")]) == 0
    assert dswheels(["index", "--from", str(root / "published"), "--out", str(root / "site")]) == 0
    results = []
    with StaticServer(root / "site") as site, StaticServer(root / "torch-index") as torch, StaticServer(plain) as flat:
        for tool in ("pip", "uv"):
            site.clear()
            torch.clear()
            flat.clear()
            installer = Installer(root / "venvs", tool)
            ours_args = [
                "install",
                "--dry-run",
                "deepspeed",
                "--index-url",
                site.url + "whl/cu128-torch2.9/simple/",
                "--extra-index-url",
                torch.url,
            ]
            naive_args = ["install", "--dry-run", "deepspeed", "--no-index", "--find-links", flat.url]
            ours_result = installer.pip(*ours_args) if tool == "pip" else installer.uv("pip", *ours_args)
            naive_result = installer.pip(*naive_args) if tool == "pip" else installer.uv("pip", *naive_args)
            assert ours_result.ok, ours_result.output
            assert naive_result.ok, naive_result.output
            ours = site.sent() + torch.sent()
            naive = flat.sent()
            print(
                f"{tool} resolving deepspeed: {ours:,} bytes from our index ({ours / naive:.4%}) vs {naive:,} from "
                f"a plain find-links directory; wheels fetched: ours "
                f"{len([p for p in site.paths() if p.endswith('.whl')])}, plain "
                f"{len([p for p in flat.paths() if p.endswith('.whl')])}"
            )
            results.append(
                Result(
                    f"{tool} bytes while resolving (vs find-links dir)",
                    ours / 1e6,
                    naive / 1e6,
                    unit="MB",
                    target="<= 1%",
                )
            )
    return results


def run() -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="dswheels-bench-") as tmp:
        root = Path(tmp)
        return [*bench_generation(root / "generation", 10_000), *bench_resolve_bytes(root / "bytes", 20_000_000)]
