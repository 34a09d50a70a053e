"""Per-OS decisions live in the platform seam (dswheels/platforms/) and in the OS's data (kernel/platform_traits.py).

Elsewhere a module asks its platform's module or reads its traits instead of comparing OS names. This test reads
every other module of the package and counts its comparisons with an OS: an OS name (``"windows"``, ``"win32"``,
...), a member of ``OS`` or ``Platform``, ``sys.platform``, ``os.name`` or ``platform.system()``. A new one fails
here; the few left are listed below, each with why the OS is data there. Docstrings are text, not comparisons, and
the probes stand in for the target interpreter (they run inside it, stdlib only), so neither is read.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dswheels"

# Where the OS decides: the seam and the OS's data (and the probes, which run as the target interpreter).
SEAM = ("platforms/", "kernel/platform_traits.py", "probes/")

_OS_NAMES = frozenset({"windows", "linux", "darwin", "win32", "nt", "posix", "cygwin"})
_MEMBERS = {
    "OS": frozenset({"WINDOWS", "LINUX"}),
    "Platform": frozenset({"WIN_AMD64", "LINUX_X86_64", "LINUX_AARCH64"}),
}
_RUNNING = frozenset({("sys", "platform"), ("os", "name")})

# module (relative to dswheels/) -> (how many comparisons, why the OS is data there, not a decision to move)
ALLOWED: dict[str, tuple[int, str]] = {
    # The machine dswheels runs on, for a system call or a file-system convention: these test sys.platform itself
    # (mypy checks each branch on its own platform only: `mypy --platform win32`), below the seam (host/) or in a
    # build's own plumbing on any machine (its work directory, jobserver, compiler cache).
    "host/machine.py": (3, "the memory and CPU feature APIs (ctypes.windll, /proc), and host_os() itself"),
    "host/files.py": (4, "directory locks and fsync, msvcrt's locks, renameat2 (Linux's exchange)"),
    "host/proc.py": (1, "SIGINT before terminate: POSIX signals"),
    "host/cache.py": (1, "the user's cache directory: LOCALAPPDATA or XDG_CACHE_HOME"),
    "building/effects/workdir.py": (1, "a junction needs no privilege where a symlink does (Windows)"),
    "building/effects/jobserver.py": (1, "the jobserver is a semaphore on Windows, a fifo elsewhere"),
    "building/effects/compile.py": (1, "children's CPU seconds come from `resource` (POSIX only)"),
    "building/effects/compiler_cache.py": (2, "ccache's compiler-named links and sccache's shell wrapper (POSIX)"),
    "doctor/effects/collect_facts.py": (1, "the registry (winreg) is read on Windows only"),
    # Upstream's and compat's data, keyed by OS as they spell it.
    "facts/pypi_json.py": (1, "a wheel's tag names its OS: the Linux wheel's METADATA is read"),
    "facts/compare_deepspeed.py": (1, "the ops compat.yml ships on Windows, against DeepSpeed's win32 checks"),
    "plan/costs.py": (3, "compile_times.yml keys its runners and op figures by OS"),
    "plan/canary.py": (1, "the canary is a Windows CUDA cell by definition: the Wine pre-flight of the Windows jobs"),
}


def _is_os(node: ast.AST) -> bool:
    """An OS named in code: a name, a member of OS/Platform, the running interpreter's, or a tuple of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.lower() in _OS_NAMES
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr in _MEMBERS.get(node.value.id, ()) or (node.value.id, node.attr) in _RUNNING
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        return (node.func.value.id, node.func.attr) == ("platform", "system")
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_os(e) for e in node.elts)
    return False


def os_decisions(source: str) -> list[int]:
    """The lines of ``source`` that compare something with an OS (or test the running one's name)."""
    found: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_is_os(n) for n in (node.left, *node.comparators)):
            found.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"startswith", "endswith"}
            and _is_os(node.func.value)
        ):
            found.append(node.lineno)  # sys.platform.startswith("win")
    return sorted(found)


def _counted() -> dict[str, list[int]]:
    counts: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(SEAM):
            continue
        lines = os_decisions(path.read_text(encoding="utf-8"))
        if lines:
            counts[rel] = lines
    return counts


def test_os_decisions_stay_in_the_seam_and_the_traits() -> None:
    counted = _counted()
    new = {rel: lines for rel, lines in counted.items() if len(lines) > ALLOWED.get(rel, (0, ""))[0]}
    assert not new, (
        "an OS compared outside dswheels/platforms and kernel/platform_traits.py (file: lines); ask "
        f"platform_module(...) or traits(...) instead, or list it in ALLOWED with why the OS is data there: {new}"
    )
    # an entry no longer needed goes, so the list stays the truth
    stale = {rel: want for rel, (want, _why) in ALLOWED.items() if len(counted.get(rel, ())) != want}
    assert not stale, f"ALLOWED says more than the code does (file: count listed): {stale}"


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ('if facts.os == "windows":\n    pass\n', [1]),
        ("x = os_name != 'Linux'\n", [1]),
        ("ok = host_os() is OS.WINDOWS\n", [1]),
        ("ok = cell.platform is not Platform.LINUX_X86_64\n", [1]),
        ('if sys.platform == "win32":\n    pass\n', [1]),
        ("nt = os.name == 'nt'\n", [1]),
        ("w = platform.system() == system\n", [1]),
        ('both = os in ("linux", "windows")\n', [1]),
        ('win = sys.platform.startswith("win")\n', [1]),
        # data, not decisions: a table keyed by OS, a lookup, a docstring, the OS named in a message
        ('PATHS = {OS.LINUX: "bin", OS.WINDOWS: "Scripts"}\nrow = PATHS[os]\n', []),
        ('def f() -> None:\n    """if os == "windows": ..."""\n', []),
        ('message = f"{os} is not windows"\nok = os in lib.link_on\n', []),
    ],
)
def test_what_counts_as_an_os_decision(source: str, lines: list[int]) -> None:
    assert os_decisions(source) == lines
