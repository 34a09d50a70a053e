"""The ``dswheels`` command lines of a workflow's ``run:`` steps, and the variables each script reads.

With the logic in dswheels, these lines are what a workflow does: the structural tests parse
each with dswheels' own argument parser and check that every variable a script reads is set
by the step, its job, the workflow or the runner.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from dswheels.cli import build_parser
from dswheels.cli.flags import each_flag
from dswheels.cli.parser import COMMAND_DEST
from tests.gha.expressions import Value
from tests.gha.model import as_map, as_str_map
from tests.gha.steps import reusable

__all__ = ["RUNNER_VARIABLES", "Invocation", "Script", "env_defaults", "invocations", "scripts"]

# what the runner sets for every step (GitHub docs: "Store information in variables", default variables)
RUNNER_VARIABLES = frozenset(
    {
        "CI",
        "GITHUB_ACTIONS",
        "GITHUB_API_URL",
        "GITHUB_EVENT_NAME",
        "GITHUB_ENV",
        "GITHUB_EVENT_PATH",
        "GITHUB_OUTPUT",
        "GITHUB_PATH",
        "GITHUB_REF",
        "GITHUB_REF_NAME",
        "GITHUB_REPOSITORY",
        "GITHUB_SHA",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_WORKSPACE",
        "RUNNER_OS",
        "RUNNER_TEMP",
    }
)
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_ASSIGNED = re.compile(r"(?:^|[\s;(])([A-Za-z_][A-Za-z0-9_]*)=", re.MULTILINE)
_LOOP = re.compile(r"(?:^|[\s;(])for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b", re.MULTILINE)  # bash sets a for loop's name


@dataclass(frozen=True, slots=True)
class Script:
    job: str
    step: str
    text: str
    defined: frozenset[str]  # variables the step, its job and the workflow set (env:)

    @property
    def reads(self) -> frozenset[str]:
        """The variables the script reads that it does not set itself."""
        assigned = frozenset(_ASSIGNED.findall(self.text)) | frozenset(_LOOP.findall(self.text))
        return frozenset(_VARIABLE.findall(self.text)) - assigned


@dataclass(frozen=True, slots=True)
class Invocation:
    job: str
    step: str
    argv: tuple[str, ...]  # after ``dswheels``; variables left as written ("$CELLS")


def scripts(workflow: dict[str, Value]) -> Iterator[Script]:
    """Every ``run:`` script of the workflow with the variables its step can read from ``env:``; a job
    that calls a reusable workflow runs that workflow's job, with that workflow's ``env:``."""
    for job_name in as_map(workflow["jobs"], "jobs"):
        source, name = reusable(workflow, job_name) or (workflow, job_name)
        spec = as_map(as_map(source["jobs"], "jobs")[name], job_name)
        top = set(as_str_map(source.get("env"), "env"))
        in_job = top | set(as_str_map(spec.get("env"), f"{job_name}.env"))
        for index, value in enumerate(spec.get("steps") or []):  # type: ignore[arg-type]
            step = as_map(value, f"{job_name}.steps[{index}]")
            if "run" in step:
                defined = frozenset(in_job | set(as_str_map(step.get("env"), "env")))
                yield Script(job_name, str(step.get("name", index)), str(step["run"]), defined)


def invocations(workflow: dict[str, Value]) -> Iterator[Invocation]:
    """Every ``dswheels ...`` command line (a line of a script, ``\\`` continuations joined)."""
    for script in scripts(workflow):
        for line in script.text.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["dswheels"]:
                yield Invocation(script.job, script.step, tuple(words[1:]))


def env_defaults(*command: str) -> dict[str, str]:
    """``dswheels COMMAND...``'s options and the variables they fall back to (its parser, not its help)."""
    parser = build_parser()
    for name in command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    flags = parser.get_default(COMMAND_DEST).flags
    return {flag.key: flag.env for flag in each_flag(flags) if flag.env}
