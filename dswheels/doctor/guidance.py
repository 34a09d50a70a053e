"""Where to set CUDA_HOME for this kind of environment (system, venv or conda) and OS."""

from __future__ import annotations

from dswheels.doctor.checkup import Verdict
from dswheels.doctor.environment_view import Env, best_toolkit, env_kind
from dswheels.doctor.per_os import words_for
from dswheels.kernel.platform_traits import conventions

__all__ = ["cuda_home_guidance"]


def cuda_home_guidance(env: Env, verdict: Verdict) -> tuple[str, ...]:
    facts = env.facts
    if env.variant is None or not env.variant.is_cuda:
        return ()
    best = best_toolkit(env)
    cuda = env.variant.cuda_text
    kind = env_kind(facts)
    py = facts.python
    words, paths = words_for(facts.os), conventions(facts.os)
    example = best.root if best else words.toolkit_example.format(cuda=cuda)
    scripts = paths.join(py.prefix if py else "<venv>", paths.venv_scripts)
    lines = [*words.guidance_first]
    lines += [line.format(example=example, scripts=scripts) for line in words.guidance[kind]]
    lines += words.guidance_last
    if verdict.cell is not None and verdict.cell.variant.cuda:
        lines.append(
            f"The toolkit must be CUDA {verdict.cell.variant.cuda[0]}.x (torch refuses another major); "
            f"CUDA {verdict.cell.variant.cuda_text} exactly avoids DeepSpeed's minor-version check.",
        )
    return tuple(lines)
