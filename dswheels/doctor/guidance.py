"""Where to set CUDA_HOME for this kind of environment (system, venv or conda) and OS."""

from __future__ import annotations

import ntpath
import posixpath

from dswheels.doctor.checkup import Verdict
from dswheels.doctor.environment_view import Env, best_toolkit, env_kind

__all__ = ["cuda_home_guidance"]


def cuda_home_guidance(env: Env, verdict: Verdict) -> tuple[str, ...]:
    facts = env.facts
    if env.variant is None or not env.variant.is_cuda:
        return ()
    best = best_toolkit(env)
    cuda = env.variant.cuda_text
    kind = env_kind(facts)
    py = facts.python
    lines: list[str] = []
    if facts.os == "windows":
        example = best.root if best else f"C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{cuda}"
        lines.append(
            "The CUDA installer sets CUDA_PATH (and CUDA_PATH_Vxx_y per version); torch uses CUDA_HOME first, then "
            "CUDA_PATH. With several toolkits, set CUDA_HOME to the one matching torch's CUDA.",
        )
        if kind == "conda":
            lines.append(f'conda: conda env config vars set CUDA_HOME="{example}" and re-activate the environment;')
            lines.append(
                "       or install the toolkit into the env (conda install -c nvidia cuda-toolkit=X.Y) and set "
                "CUDA_HOME=%CONDA_PREFIX%\\Library",
            )
        elif kind == "venv":
            scripts = ntpath.join(py.prefix, "Scripts") if py else "<venv>\\Scripts"
            lines.append(f'venv: add  set "CUDA_HOME={example}"  to {scripts}\\activate.bat and ')
            lines.append(f'      $env:CUDA_HOME = "{example}"  to {scripts}\\Activate.ps1')
        else:
            lines.append(f'system: setx CUDA_HOME "{example}"  (applies to new terminals)')
    else:
        example = best.root if best else f"/usr/local/cuda-{cuda}"
        if kind == "conda":
            lines.append(
                f"conda: conda env config vars set CUDA_HOME={example}; conda deactivate; conda activate <env>"
            )
            lines.append(
                "       or use the env's own toolkit: conda install -c nvidia cuda-toolkit=X.Y, then "
                "CUDA_HOME=$CONDA_PREFIX (headers may live in $CONDA_PREFIX/targets/x86_64-linux/include: "
                "set CUDA_INC_PATH to it)",
            )
        elif kind == "venv":
            activate = posixpath.join(py.prefix, "bin", "activate") if py else "<venv>/bin/activate"
            lines.append(f"venv: echo 'export CUDA_HOME={example}' >> {activate}  (set on every activation)")
        else:
            lines.append(f"system: add  export CUDA_HOME={example}  to ~/.bashrc (or ~/.profile)")
        lines.append(
            "Avoid relying on nvcc on PATH: torch takes the parent of its bin/ as CUDA_HOME, which is wrong for "
            "wrapper scripts such as /usr/local/bin/nvcc.",
        )
    if verdict.cell is not None and verdict.cell.variant.cuda:
        lines.append(
            f"The toolkit must be CUDA {verdict.cell.variant.cuda[0]}.x (torch refuses another major); "
            f"CUDA {verdict.cell.variant.cuda_text} exactly avoids DeepSpeed's minor-version check.",
        )
    return tuple(lines)
