"""A Windows build tool (cl, link, lib, nvcc, ...) run under Wine, called as the Linux program it stands in for.

The Wine host (:mod:`dswheels.platforms.wine`) writes one small script per tool into a folder on
the build's ``PATH`` (``cl``, ``cl.exe``, ``link.exe``, ``nvcc``, ...); each runs
``python wine_tool.py CONFIG TOOL ARGS...``. This program:

* translates every argument that names a file of this machine into the path Wine gives it
  (``/work/x.cpp`` -> ``Z:\\work\\x.cpp``, also after an option: ``/Fo/work/x.obj``,
  ``-I/work/inc``, ``/LIBPATH:/work/lib``), so setuptools, torch's ninja file and DeepSpeed's
  builders can be run unchanged on Linux paths;
* runs the tool's ``.exe`` under ``wine`` with the Windows environment the config names
  (``INCLUDE``, ``LIB``, ``PATH`` through ``WINEPATH``);
* translates the paths Windows tools print back (``Note: including file: Z:\\...``, which
  ninja's ``deps = msvc`` reads) and rewrites nvcc's ``-MF`` depfile the same way, so ninja on
  Linux tracks the headers; the output is decoded from the OEM code page tools print in.

The exit code is the tool's. Standard library only: it runs in the build's interpreter.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

# Options whose value (glued to the option) is a path, longest first; cl's are case-sensitive,
# link's are not (matched as they are written by setuptools and torch).
_PATH_OPTIONS = (
    "/LIBPATH:",
    "/IMPLIB:",
    "/OUT:",
    "/PDB:",
    "/DEF:",
    "/MAP:",
    "/MANIFESTFILE:",
    "/Fo",
    "/Fe",
    "/Fd",
    "/Fp",
    "/Fa",
    "/FI",
    "/I",
    "-I",
    "-L",
    "--output-file=",
    "-odir=",
)
_WINDOWS_PATH = re.compile(r"\b([A-Za-z]):\\([^\s\"'<>|*?]*)")


def to_windows(path: str, drives: dict[str, str]) -> str:
    """``/work/x`` -> ``Z:\\work\\x`` (or the drive that maps a longer prefix)."""
    for prefix, drive in sorted(drives.items(), key=lambda kv: -len(kv[0])):
        if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
            rest = path[len(prefix.rstrip("/")) :]
            return f"{drive}:" + rest.replace("/", "\\")
    return path


def _is_local_path(text: str) -> bool:
    """An absolute path of this machine (its first folder exists; an option like ``/MD`` is not one)."""
    if not text.startswith("/") or text.startswith("//"):
        return False
    first = text[1:].split("/", 1)[0]
    return bool(first) and "/" in text[1:] and Path("/" + first).exists()


def translate_arg(arg: str, drives: dict[str, str]) -> str:
    if _is_local_path(arg):
        return to_windows(arg, drives)
    for option in _PATH_OPTIONS:
        if arg.startswith(option) and _is_local_path(arg[len(option) :]):
            return option + to_windows(arg[len(option) :], drives)
    if arg.startswith("@") and _is_local_path(arg[1:]):
        return "@" + to_windows(arg[1:], drives)
    if "=" in arg and arg.startswith("-"):  # -Dname=/path is a value, not a file: left as it is
        return arg
    if "," in arg and not arg.startswith("/"):  # nvcc's -Xcompiler a,b lists
        return ",".join(translate_arg(part, drives) for part in arg.split(","))
    return arg


def to_local(text: str, drives: dict[str, str]) -> str:
    """Windows paths a tool printed, on the drives we map, back to this machine's."""
    back = {drive.upper(): prefix.rstrip("/") for prefix, drive in drives.items()}

    def replace(match: re.Match[str]) -> str:
        prefix = back.get(match.group(1).upper())
        if prefix is None:
            return match.group(0)
        return prefix + "/" + match.group(2).replace("\\", "/")

    return _WINDOWS_PATH.sub(replace, text)


def _rewrite_depfile(args: list[str], drives: dict[str, str]) -> None:
    """nvcc's ``-MF FILE`` depfile lists Windows paths: ninja on Linux needs this machine's."""
    for i, arg in enumerate(args[:-1]):
        if arg == "-MF":
            depfile = Path(args[i + 1])
            if depfile.is_file():
                text = depfile.read_text(encoding="utf-8", errors="replace")
                # Windows depfiles escape spaces as "\ " and end lines with " \"; only the drive paths change
                depfile.write_text(to_local(text, drives), encoding="utf-8")


def _run(config: dict[str, Any], tool: str, args: list[str]) -> tuple[int, str, str]:
    """Run ``tool`` under Wine; (exit code, stdout, stderr) with this machine's paths."""
    drives: dict[str, str] = config["drives"]
    env = {**os.environ, **config["env"]}
    command = [config["wine"], config["tools"][tool], *(translate_arg(a, drives) for a in args)]
    completed = subprocess.run(command, env=env, capture_output=True, check=False)
    encoding = config.get("output_encoding", "cp437")
    out, err = (
        to_local(data.decode(encoding, errors="replace").replace("\r\n", "\n"), drives)
        for data in (completed.stdout, completed.stderr)
    )
    return completed.returncode, out, err


# --- import libraries made from what a link leaves unresolved ------------------------------------
# torch's Windows CPU wheels have no c10_cuda.lib/torch_cuda.lib. When the config names them under
# "synthesize", a link that asks for them is run once against empty import libraries; each name it
# reports unresolved (LNK2019/LNK2001, decorated in parentheses) that belongs to one of them (by the
# C++ namespace in the decorated name) goes into that library, and the link runs again. Every name
# so placed is written to the config's "synthesized_log" (the manifest lists them): the result proves
# the names exist in torch's headers, not that torch_cuda.dll exports them.
_UNRESOLVED = re.compile(r'LNK20(?:19|01): unresolved external symbol (?:"[^"]*" \((\S+)\)|(\S+))')


def _lib_dirs(args: list[str]) -> list[Path]:
    return [Path(a.split(":", 1)[1]) for a in args if a.upper().startswith("/LIBPATH:")]


def _synthesized(config: dict[str, Any], args: list[str]) -> dict[str, dict[str, Any]]:
    """The libraries this link names that the config says to make, and that no /LIBPATH folder has."""
    wanted: dict[str, dict[str, Any]] = config.get("synthesize") or {}
    named = {a.lower() for a in args if a.lower().endswith(".lib")}
    dirs = _lib_dirs(args)
    return {lib: spec for lib, spec in wanted.items() if lib in named and not any((d / lib).is_file() for d in dirs)}


def _make_lib(config: dict[str, Any], folder: Path, lib: str, dll: str, names: list[str]) -> tuple[int, str]:
    definition = folder / (Path(lib).stem + ".def")
    lines = [f"LIBRARY {dll}", "EXPORTS", *(f"{n} DATA" if _is_data(n) else n for n in names)]
    definition.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = _run(config, "lib.exe", ["/nologo", f"/def:{definition}", "/machine:x64", f"/out:{folder / lib}"])
    return code, out + err


def _is_data(decorated: str) -> bool:
    """A variable, not a function: MSVC's storage-class codes 2 and 3 after the ``@@`` of the qualified name."""
    return bool(re.search(r"@@[23]", decorated))


def _link_synthesizing(config: dict[str, Any], args: list[str], wanted: dict[str, dict[str, Any]]) -> int:
    out_arg = next((a for a in args if a.upper().startswith("/OUT:")), "/OUT:link")
    folder = Path(config["synthesized_dir"]) / Path(out_arg.split(":", 1)[1]).name
    folder.mkdir(parents=True, exist_ok=True)
    for lib, spec in wanted.items():
        code, text = _make_lib(config, folder, lib, spec["dll"], [])
        if code != 0:
            sys.stdout.write(text)
            return code
    linked = [*args, f"/LIBPATH:{folder}"]
    code, out, err = _run(config, "link.exe", linked)
    if code == 0:
        sys.stdout.write(out + err)
        return 0
    unresolved = sorted({(m.group(1) or m.group(2)).removeprefix("__imp_") for m in _UNRESOLVED.finditer(out + err)})
    placed: dict[str, list[str]] = {lib: [] for lib in wanted}
    for name in unresolved:
        owner = next((lib for lib, spec in wanted.items() if any(m in name for m in spec["markers"])), None)
        if owner is not None:
            placed[owner].append(name)
    if not any(placed.values()):
        sys.stdout.write(out + err)
        return code
    for lib, names in placed.items():
        code, text = _make_lib(config, folder, lib, wanted[lib]["dll"], names)
        if code != 0:
            sys.stdout.write(text)
            return code
    with Path(config["synthesized_log"]).open("a", encoding="utf-8") as log:
        log.write(json.dumps({"output": out_arg.split(":", 1)[1], "libraries": placed}) + "\n")
    sys.stdout.write(
        f"dswheels: {', '.join(f'{lib} ({len(n)} names)' for lib, n in placed.items())} made from the names "
        "this link left unresolved (torch's Windows wheel here is a CPU build)\n"
    )
    code, out, err = _run(config, "link.exe", linked)
    sys.stdout.write(out + err)
    return code


# nvcc.exe runs its stages (cudafe++, ptxas, fatbinary, cl) through cmd; under Wine 8, cmd once failed to start
# cudafe++ for one unit of a one-hour build in which every other unit started it fine (Wine's own message, below):
# a start that failed, not a compile that did, so the unit is compiled again, twice at most. Windows has no such gap.
_WINE_COULD_NOT_START = "as an internal or external command, or batch script."
_WINE_START_RETRIES = 2


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    tool, args = argv[2], argv[3:]
    if tool not in config["tools"]:
        sys.stderr.write(f"dswheels wine_tool: no Windows program for {tool!r} in {argv[1]}\n")
        return 127
    if tool == "link.exe" and (wanted := _synthesized(config, args)):
        return _link_synthesizing(config, args, wanted)
    code, out, err = _run(config, tool, args)
    for _ in range(_WINE_START_RETRIES if tool.startswith("nvcc") else 0):
        if code == 0 or _WINE_COULD_NOT_START not in out + err:
            break
        sys.stderr.write(f"dswheels wine_tool: Wine's cmd could not start one of nvcc's tools; {tool} again\n")
        code, out, err = _run(config, tool, args)
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.stderr.write(err)
    if tool.startswith("nvcc"):
        _rewrite_depfile(args, config["drives"])
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
