"""Files that are not what they seem, and destinations that cannot be written (issue 20: 1, 7, 9, 10, 13).

Real links, FIFOs, devices and file systems, through the real command line in a child process
(a hang is a timeout, an unbounded read a ``MemoryError`` under an address-space limit, an
unbounded copy a write past a file-size limit):

* a link placed beside published wheels (``<wheel>.manifest.json``, ``.metadata``, a ``.whl``,
  the ledger) is never followed: the file it names is not read, changed (chmod) or served;
* a FIFO (with no writer, or a writer that never finishes) or a device as any input file is
  refused at once (exit 2), never waited on;
* a ledger-vouched ``.metadata`` or a local index's wheel that became ``/dev/zero`` is not read
  without end;
* ``publish --dir`` and ``index --out`` into /proc, /sys, below a regular file, through a
  dangling link or onto a full file system end in exit 7 and one paragraph, leaving nothing
  half-written.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dswheels.stores import list_published
from dswheels.stores.served_index import read_index, read_manifest
from tests.conftest import ROOT
from tests.support.wheels import write_deepspeed_wheel, write_manifest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, devices, symlinks and setrlimit are POSIX"),
]

QUICK = 60  # seconds: every case here is judged in about one; a hang is a failure, not a wait


def _dswheels(
    *args: str, cwd: Path, memory: int | None = None, file_size: int | None = None, timeout: float = QUICK
) -> subprocess.CompletedProcess[str]:
    """``python -m dswheels ARGS`` in ``cwd``, with at most ``memory`` bytes of address space and
    ``file_size`` bytes per written file (a write past it fails with EFBIG: Python ignores SIGXFSZ)."""

    def limit() -> None:
        import resource  # POSIX only, in the child

        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_ACTIONS", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        [sys.executable, "-m", "dswheels", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
        preexec_fn=limit,
    )


def _refused(done: subprocess.CompletedProcess[str], code: int, *expected: str) -> str:
    """Exit ``code``, one paragraph on stderr (``<title>: what``, indented details, ``hint:``) saying ``expected``."""
    err = done.stderr
    assert "Traceback" not in err, err
    assert done.returncode == code, (done.returncode, err)
    lines = [line for line in err.rstrip("\n").splitlines() if not line.startswith("warning: ")]
    assert lines, "an error says something"
    assert lines[0].split(":", 1)[0] in {"bad input", "source error", "verify failed", "publish failed"}, err
    assert all(line.startswith(("  ", "hint: ")) for line in lines[1:]), err
    for text in expected:
        assert text in err, (text, err)
    return err


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    """Exit 0 without a traceback; what it printed (warnings included)."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout + done.stderr


def _symlinks(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_symlink()]


def _temporaries(*roots: Path) -> list[Path]:
    return [p for root in roots if root.is_dir() for p in root.rglob(".dswheels-tmp-*")]


@pytest.fixture
def published(tmp_path: Path) -> Path:
    """A directory `dswheels publish` filled with one wheel (no manifest), its .metadata and the ledger."""
    dist = write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.13").parent
    _ok(_dswheels("publish", str(dist), "--dir", "published", cwd=tmp_path))
    return tmp_path / "published"


def _wheel_in(directory: Path) -> Path:
    (wheel,) = directory.glob("*.whl")
    return wheel


def _secret(tmp_path: Path, text: str = "s3cret\n") -> Path:
    """A private file outside the published directory (0600)."""
    secret = tmp_path / "outside" / "secret"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text(text)
    secret.chmod(0o600)
    return secret


# --- 1: a link beside a published wheel -------------------------------------------------------------------------


def test_a_manifest_link_beside_a_published_wheel_is_not_followed(tmp_path: Path, published: Path) -> None:
    """Even a link to a manifest that describes the wheel exactly: the link is not what publish wrote."""
    wheel = _wheel_in(published)
    real = write_manifest(wheel)  # a manifest that would be believed, were it a file
    outside = _secret(tmp_path, real.read_text(encoding="utf-8"))
    real.unlink()
    real.symlink_to(outside)
    err = _ok(_dswheels("index", "--from", "published", "--out", "site", cwd=tmp_path))
    assert "is a symbolic link, not a regular file" in err
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600, "chmod through the link"
    files = tmp_path / "site" / "files"
    assert sorted(p.name for p in files.iterdir()) == sorted([wheel.name, wheel.name + ".metadata"])
    assert _symlinks(tmp_path / "site") == []
    assert not any(outside.read_bytes() == p.read_bytes() for p in files.iterdir())


def test_links_in_place_of_published_files_are_left_out(tmp_path: Path, published: Path) -> None:
    """A ``.whl`` link to a real wheel elsewhere, and a ledger-vouched .metadata replaced by a link: neither
    is read through nor served; the wheel's own METADATA is served instead of the sidecar."""
    wheel = _wheel_in(published)
    elsewhere = write_deepspeed_wheel(tmp_path / "elsewhere", variant="cu128", torch="2.9")
    (published / elsewhere.name).symlink_to(elsewhere)
    sidecar = published / (wheel.name + ".metadata")
    own = sidecar.read_bytes()
    moved = _secret(tmp_path, own.decode())  # the same bytes, so only the link gives it away
    sidecar.unlink()
    sidecar.symlink_to(moved)
    err = _ok(_dswheels("index", "--from", "published", "--out", "site", cwd=tmp_path))
    assert f"{elsewhere.name} is not a regular file" in err
    files = tmp_path / "site" / "files"
    assert sorted(p.name for p in files.iterdir()) == sorted([wheel.name, wheel.name + ".metadata"])
    served = files / (wheel.name + ".metadata")
    assert served.read_bytes() == own
    assert not served.is_symlink()
    assert served.stat().st_ino != moved.stat().st_ino
    assert stat.S_IMODE(moved.stat().st_mode) == 0o600
    assert _symlinks(tmp_path / "site") == []


def test_a_private_published_wheel_is_copied_into_the_site_never_chmodded(tmp_path: Path, published: Path) -> None:
    """A wheel published 0600 (by an older dswheels): the site gets a readable copy; the published file keeps 0600."""
    wheel = _wheel_in(published)
    wheel.chmod(0o600)
    old = os.umask(0o022)
    try:
        _ok(_dswheels("index", "--from", "published", "--out", "site", cwd=tmp_path))
    finally:
        os.umask(old)
    served = tmp_path / "site" / "files" / wheel.name
    assert stat.S_IMODE(wheel.stat().st_mode) == 0o600
    assert stat.S_IMODE(served.stat().st_mode) == 0o644
    assert served.read_bytes() == wheel.read_bytes()
    assert served.stat().st_ino != wheel.stat().st_ino


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_publish_neither_reads_nor_replaces_a_link_at_a_name_it_publishes(tmp_path: Path) -> None:
    """A link to /dev/zero where the .metadata goes: hashing it would never end; exit 7, the link untouched."""
    wheel = write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.13")
    target = tmp_path / "published"
    target.mkdir()
    (target / (wheel.name + ".metadata")).symlink_to("/dev/zero")
    done = _dswheels("publish", "dist", "--dir", "published", cwd=tmp_path)
    _refused(done, 7, "is a symbolic link, not a regular file")
    assert (target / (wheel.name + ".metadata")).readlink() == Path("/dev/zero")
    assert _temporaries(target) == []


def test_a_link_named_like_a_wheel_is_not_counted_as_published(tmp_path: Path, published: Path) -> None:
    """`plan --skip-published DIR` lists what `index` would: a link is not a published wheel."""
    wheel = _wheel_in(published)
    elsewhere = write_deepspeed_wheel(tmp_path / "elsewhere", variant="cu128", torch="2.9")
    (published / elsewhere.name).symlink_to(elsewhere)
    assert list_published(str(published)) == [wheel.name]


def test_a_manifest_link_in_a_local_index_is_not_believed(tmp_path: Path, published: Path) -> None:
    """`install` and `doctor` read the manifest beside a local index's wheel as `index` does: not through a link."""
    _ok(_dswheels("index", "--from", "published", "--out", "site", cwd=tmp_path))
    _page, files = read_index(str(tmp_path / "site"))
    wheel = tmp_path / "site" / "files" / files[0].filename
    manifest = write_manifest(wheel)
    outside = _secret(tmp_path, manifest.read_text(encoding="utf-8"))
    manifest.unlink()
    manifest.symlink_to(outside)
    seen = read_manifest(files[0])
    assert seen.runtime is None
    assert "is a symbolic link, not a regular file" in seen.note


# --- 7: a local index whose file is a link to /dev/zero, a FIFO, or huge -----------------------------------------

_DOWNLOAD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from dswheels.stores.served_index import download_wheel, read_index
    from dswheels.kernel.errors import DswheelsError

    _page, files = read_index(sys.argv[1])
    try:
        download_wheel(files[0], Path(sys.argv[2]))
    except DswheelsError as exc:
        print(exc.render(), file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    """
)


def _local_index(tmp_path: Path, make: Callable[[Path], object], sha256: str = "0" * 64) -> Path:
    """A local index whose one link names ``files/<wheel>``, made by ``make``."""
    name = "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl"
    root = tmp_path / "index"
    (root / "files").mkdir(parents=True)
    page = root / "simple" / "deepspeed" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="../../files/{name}#sha256={sha256}">{name}</a>\n', encoding="utf-8")
    make(root / "files" / name)
    return root


def _download(tmp_path: Path, index: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "download.py"
    script.write_text(_DOWNLOAD, encoding="utf-8")

    def limit() -> None:
        import resource  # POSIX only, in the child

        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024**2, 64 * 1024**2))

    return subprocess.run(
        [sys.executable, str(script), str(index), str(tmp_path / "dl")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=QUICK,
        check=False,
        preexec_fn=limit,
    )


def _sparse(size: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with path.open("wb") as fh:
            fh.truncate(size)  # no blocks: the size is what matters

    return make


@pytest.mark.parametrize(
    ("make", "said"),
    [
        pytest.param(lambda p: p.symlink_to("/dev/zero"), "is a symbolic link", id="link-to-dev-zero"),
        pytest.param(os.mkfifo, "is a FIFO", id="fifo"),
        pytest.param(_sparse(9 * 1024**3), "more than", id="larger-than-any-wheel"),
    ],
)
def test_a_local_index_file_is_read_only_as_a_bounded_regular_file(
    tmp_path: Path, make: Callable[[Path], object], said: str
) -> None:
    """`install` from a local index: what a link names is copied only if it is a regular file no larger than a wheel
    may be (a download stops at 8 GiB); the copy is refused before a byte is written."""
    done = _download(tmp_path, _local_index(tmp_path, make))
    _refused(done, 4, "cannot download", said)
    assert not [p for p in (tmp_path / "dl").rglob("*") if p.is_file()], "a partial download was left"


def test_a_local_index_file_with_its_sha256_is_downloaded(tmp_path: Path) -> None:
    """The same path, for the file it is meant for: the checks refuse only what they should."""
    wheel = write_deepspeed_wheel(tmp_path / "w", variant="cpu", torch="2.13")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    index = _local_index(tmp_path, lambda p: p.write_bytes(wheel.read_bytes()), sha256=sha)
    done = _download(tmp_path, index)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "dl" / wheel.name).read_bytes() == wheel.read_bytes()


# --- 9 and 10: FIFOs and endless devices as input files ------------------------------------------------------------


@pytest.fixture(params=["no-writer", "stalled-writer"])
def fifo(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A FIFO with no writer, or with one that wrote a line and never finishes."""
    path = tmp_path / "input.fifo"
    os.mkfifo(path)
    if request.param == "no-writer":
        yield path
        return
    fd = os.open(path, os.O_RDWR)  # a writer that keeps it open (RDWR: the open does not wait for a reader)
    os.write(fd, b"schema: 1\n")
    try:
        yield path
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "args",
    [
        ("plan", "--matrix", "{fifo}"),
        ("doctor", "--facts", "{fifo}"),
        ("index", "--from", "published", "--out", "site", "--yanked", "{fifo}"),
        ("facts", "check", "--compat", "{fifo}"),
        ("build", "--plan", "{fifo}", "--prepare-only"),
        ("facts", "builds", "--facts", "{fifo}"),
    ],
    ids=lambda args: "-".join(a for a in args[:2] if not a.startswith("-")),
)
def test_a_fifo_as_an_input_file_is_refused_at_once(tmp_path: Path, fifo: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "published").mkdir()
    done = _dswheels(*(a.format(fifo=fifo) for a in args), cwd=tmp_path)
    _refused(done, 2, "is a FIFO, not a regular file")


def test_a_fifo_as_a_wheel_is_refused_at_once(tmp_path: Path, fifo: Path) -> None:
    wheel = tmp_path / "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl"
    fifo.rename(wheel)
    _refused(_dswheels("verify", str(wheel), cwd=tmp_path), 6, "is a FIFO, not a regular file")


def test_a_fifo_as_the_ledger_is_ignored_by_index_and_replaced_by_publish(
    tmp_path: Path, published: Path, fifo: Path
) -> None:
    ledger = published / ".dswheels-ledger.json"
    ledger.unlink()
    fifo.rename(ledger)
    _ok(_dswheels("index", "--from", "published", "--out", "site", cwd=tmp_path))
    assert (tmp_path / "site" / "files" / _wheel_in(published).name).is_file()
    _ok(_dswheels("publish", "dist", "--dir", "published", cwd=tmp_path))
    assert stat.S_ISREG(ledger.lstat().st_mode)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_vouched_metadata_that_became_dev_zero_is_not_read(tmp_path: Path, published: Path) -> None:
    """The ledger vouches for the wheel; its .metadata became a link to /dev/zero: read without end, it was a
    MemoryError. Now it is not read at all, and the site serves the wheel's own METADATA."""
    wheel = _wheel_in(published)
    sidecar = published / (wheel.name + ".metadata")
    own = sidecar.read_bytes()
    sidecar.unlink()
    sidecar.symlink_to("/dev/zero")
    _ok(_dswheels("index", "--from", "published", "--out", "site", cwd=tmp_path, memory=2 * 1024**3))
    assert (tmp_path / "site" / "files" / sidecar.name).read_bytes() == own


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
@pytest.mark.parametrize(
    "args",
    [
        ("facts", "check", "--compat", "/dev/zero"),
        ("doctor", "--facts", "/dev/zero"),
        ("plan", "--matrix", "/dev/zero"),
    ],
    ids=lambda args: args[0],
)
def test_an_endless_device_as_an_input_file_is_refused(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = _dswheels(*args, cwd=tmp_path, memory=2 * 1024**3)
    _refused(done, 2, "/dev/zero is a character device, not a regular file")


def test_a_huge_regular_input_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A regular file larger than its limit (sparse: no blocks) is refused by its size, not read."""
    with (tmp_path / "matrix.yml").open("wb") as fh:
        fh.truncate(1024**2 + 1)
    _refused(_dswheels("plan", "--matrix", "matrix.yml", cwd=tmp_path, memory=2 * 1024**3), 2, "larger than 1 MiB")


# --- 13: destinations that cannot be written ----------------------------------------------------------------------


def _unwritable(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a-file").write_text("")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    places = {
        "below-a-file": tmp_path / "a-file" / "out",
        "dangling-link": tmp_path / "dangling",
        "below-a-dangling-link": tmp_path / "dangling" / "out",
    }
    if Path("/proc/self").is_dir():
        places["proc"] = Path("/proc/dswheels-test")
        places["proc-self"] = Path("/proc/self")
    if Path("/sys/kernel").is_dir():
        places["sys"] = Path("/sys/dswheels-test")
        places["sys-kernel"] = Path("/sys/kernel")
    return places


@pytest.mark.parametrize("command", ["publish", "index"])
def test_an_unwritable_destination_is_exit_7_with_one_paragraph(tmp_path: Path, command: str) -> None:
    write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.13")
    for name, place in _unwritable(tmp_path).items():
        args: tuple[str, ...]
        if command == "publish":
            args = ("publish", "dist", "--dir", str(place))
        else:  # a directory that is there is not replaced by a site (exit 2): a site inside it
            out = place / "site" if place.is_dir() else place
            args = ("index", "--from", "dist", "--out", str(out))
        done = _dswheels(*args, cwd=tmp_path)
        err = _refused(done, 7, str(place))
        assert "hint: " in err, (name, err)
    assert not (tmp_path / "nowhere").exists(), "written through a dangling link"
    assert (tmp_path / "a-file").read_text() == ""
    assert _temporaries(tmp_path) == []


def _fill(tmp_path: Path) -> Path:
    """A wheel larger than the file-size limit the runs below get."""
    wheel = write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.13", payload=2 * 1024**2, seed=3)
    assert wheel.stat().st_size > 1024**2
    return wheel


def _files(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_destination_that_fills_up_is_exit_7_and_nothing_half_written(tmp_path: Path) -> None:
    """A write that the system refuses half-way (past a file-size limit: EFBIG, as a full disk gives ENOSPC):
    publish leaves no partial wheel; index leaves the previous site exactly as it was."""
    wheel = _fill(tmp_path)
    done = _dswheels("publish", "dist", "--dir", "published", cwd=tmp_path, file_size=1024**2)
    _refused(done, 7, "publishing into published", "File too large")
    assert sorted(p.name for p in (tmp_path / "published").iterdir()) == []

    write_deepspeed_wheel(tmp_path / "small", variant="cpu", torch="2.14")
    _ok(_dswheels("index", "--from", "small", "--out", "site", cwd=tmp_path))
    before = _files(tmp_path / "site")
    wheel.chmod(0o600)  # a wheel without read bits for others is copied into the site (never chmodded): the limit bites
    done = _dswheels("index", "--from", "dist", "--out", "site", cwd=tmp_path, file_size=1024**2)
    _refused(done, 7, "writing the site", "File too large")
    assert _files(tmp_path / "site") == before
    assert _temporaries(tmp_path) == []


def _tmpfs_works() -> bool:
    """Whether this user may mount a small tmpfs in a new user and mount namespace (``unshare -rm``)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = subprocess.run(
        [unshare, "-rm", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs $d && umount $d; rmdir $d"],
        capture_output=True,
        check=False,
        timeout=QUICK,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _tmpfs_works(), reason="no unprivileged user namespace to mount a tmpfs in")
@pytest.mark.parametrize("command", ["publish", "index"])
def test_a_full_tmpfs_is_exit_7_and_nothing_half_written(tmp_path: Path, command: str) -> None:
    """A real full file system (ENOSPC): a 256 KiB tmpfs, mounted for the one run."""
    _fill(tmp_path)
    (tmp_path / "full").mkdir()
    args = "publish dist --dir full/out" if command == "publish" else "index --from dist --out full/out"
    script = (
        f"mount -t tmpfs -o size=256k tmpfs full && {sys.executable} -m dswheels {args} 2>err; "
        "echo $? >code; find full -mindepth 1 >listing"
    )
    subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=QUICK,
        check=True,
    )
    err = (tmp_path / "err").read_text()
    assert "Traceback" not in err
    assert (tmp_path / "code").read_text().strip() == "7", err
    assert os.strerror(errno.ENOSPC) in err
    assert (tmp_path / "listing").read_text().split() == (["full/out"] if command == "publish" else [])  # empty
