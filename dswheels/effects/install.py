"""Install a picked wheel into the target interpreter and prove its ops load without JIT.

:func:`quick_verify` is deliberately one small function: the ``verify`` command (issue 5) owns
the full check of a wheel and can replace it. It runs in the target interpreter: every op the
wheel marks as installed is loaded through DeepSpeed's own builder with an empty
``TORCH_EXTENSIONS_DIR``; the module must be the prebuilt one (``builder.absolute_name()``)
and nothing may appear in the extensions directory (that would be a JIT compile).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dswheels.effects.proc import capture, find_tool, marked_line, run
from dswheels.errors import DswheelsError, EnvironmentMismatchError, VerifyError

__all__ = ["VERIFY_SCRIPT", "VerifyResult", "choose_installer", "install_argv", "install_wheel", "quick_verify"]

_MARK = "DSWHEELS-VERIFY-JSON:"

VERIFY_SCRIPT = r"""
import sys
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]
import ast, importlib.util, json, os, shutil, tempfile

result = {"version": "", "accelerator": "", "torch_info": {}, "loaded": {}, "errors": [], "extension_files": []}
spec = importlib.util.find_spec("deepspeed")
if spec is None or not spec.submodule_search_locations:
    result["errors"].append("deepspeed is not importable in " + sys.executable)
else:
    # the wheel's accelerator must be the one DeepSpeed picks, or load() JIT-compiles
    path = os.path.join(list(spec.submodule_search_locations)[0], "git_version_info_installed.py")
    try:
        with open(path, encoding="utf-8") as fh:
            for node in ast.parse(fh.read()).body:
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "accelerator_name":
                    os.environ["DS_ACCELERATOR"] = str(ast.literal_eval(node.value))
    except (OSError, ValueError) as exc:
        result["errors"].append("cannot read %s: %s" % (path, exc))
    ext = tempfile.mkdtemp(prefix="dswheels-verify-ext-")
    os.environ["TORCH_EXTENSIONS_DIR"] = ext
    try:
        from deepspeed import git_version_info as info
        result["version"] = str(info.version)
        result["accelerator"] = str(getattr(info, "accelerator_name", ""))
        result["torch_info"] = {str(k): str(v) for k, v in dict(getattr(info, "torch_info", {})).items()}
        ops = sorted(name for name, on in dict(info.installed_ops).items() if on)
        if ops:
            from deepspeed.ops.op_builder.all_ops import ALL_OPS
        for name in ops:
            builder = ALL_OPS.get(name)
            if builder is None:
                result["errors"].append("%s: marked installed but DeepSpeed has no builder for it" % name)
                continue
            try:
                module = builder.load()
            except Exception as exc:
                result["errors"].append("%s: load() raised %s: %s" % (name, type(exc).__name__, exc))
                continue
            result["loaded"][name] = module.__name__
            if module.__name__ != builder.absolute_name():
                result["errors"].append("%s: loaded %s instead of the prebuilt %s (JIT-compiled)"
                                        % (name, module.__name__, builder.absolute_name()))
    except Exception as exc:
        result["errors"].append("import failed: %s: %s" % (type(exc).__name__, exc))
    finally:
        for root, _dirs, files in os.walk(ext):
            result["extension_files"].extend(os.path.relpath(os.path.join(root, f), ext) for f in files)
        shutil.rmtree(ext, ignore_errors=True)
    if result["extension_files"]:
        result["errors"].append("TORCH_EXTENSIONS_DIR is not empty after loading: something was JIT-compiled")
sys.stdout.write("\n__MARK__" + json.dumps(result) + "\n")
""".replace("__MARK__", _MARK)


@dataclass(frozen=True, slots=True)
class VerifyResult:
    version: str
    accelerator: str
    torch_info: Mapping[str, str]
    loaded: Mapping[str, str]  # op -> module name it loaded as


def choose_installer(python: str, requested: str, env: Mapping[str, str]) -> str:
    """``pip`` when the target has it (or was asked for), else ``uv`` when on PATH."""
    if requested in ("pip", "uv"):
        return requested
    probe = capture([python, "-c", "import pip"], env=env, error=EnvironmentMismatchError)
    if probe.returncode == 0:
        return "pip"
    if find_tool("uv", env) is not None:
        return "uv"
    raise EnvironmentMismatchError(
        f"{python} has no pip and uv is not on PATH",
        hint=f"add pip ({python} -m ensurepip) or install uv, then run again (or pass --installer)",
    )


def install_argv(python: str, wheel: str, installer: str) -> list[str]:
    """The command that installs ``wheel`` (a path or URL) and its dependencies into ``python``."""
    if installer == "uv":
        return ["uv", "pip", "install", "--python", python, wheel]
    return [python, "-m", "pip", "install", "--disable-pip-version-check", wheel]


def install_wheel(python: str, wheel: Path, *, installer: str, env: Mapping[str, str]) -> None:
    """Install a downloaded (and sha256-checked) wheel file and its dependencies."""
    run(
        install_argv(python, str(wheel), installer),
        env=env,
        heartbeat=30.0,
        error=EnvironmentMismatchError,
        what=f"{installer} install",
    )


def quick_verify(python: str, *, expected_version: str, env: Mapping[str, str]) -> VerifyResult:
    """Load every installed op in ``python`` with an empty TORCH_EXTENSIONS_DIR; VerifyError if any fails."""
    try:
        result = capture(
            [python, "-c", VERIFY_SCRIPT],
            env=env,
            heartbeat=30.0,
            heartbeat_label="loading the installed ops",
            error=VerifyError,
        )
    except DswheelsError as exc:
        raise VerifyError(f"could not run the verify step: {exc.message}") from None
    payload = marked_line(result.output, _MARK)
    parsed = json.loads(payload) if payload is not None else None
    data: dict[str, object] | None = parsed if isinstance(parsed, dict) else None
    if data is None:
        raise VerifyError(
            "the verify step printed no result",
            details="\n".join(result.tail[-20:]),
        )
    raw_errors = data.get("errors")
    errors = [str(e) for e in raw_errors] if isinstance(raw_errors, list) else []
    version = str(data.get("version", ""))
    if version and version != expected_version:
        errors.append(f"deepspeed.git_version_info.version is {version}, expected {expected_version}")
    loaded = data.get("loaded")
    torch_info = data.get("torch_info")
    if errors:
        raise VerifyError(
            "the installed wheel does not load its prebuilt ops",
            details="\n".join(errors),
            hint="run `dswheels doctor` in the same environment; report the output if the environment is right",
        )
    return VerifyResult(
        version=version,
        accelerator=str(data.get("accelerator", "")),
        torch_info={str(k): str(v) for k, v in torch_info.items()} if isinstance(torch_info, dict) else {},
        loaded={str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {},
    )
