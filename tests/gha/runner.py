"""Run a GitHub Actions workflow on this machine, as far as this machine can.

The jobs run in ``needs`` order with GitHub's rules: job and step ``if:`` with the status
functions, ``needs.<job>.result`` and outputs, matrices (``fromJSON`` of an earlier job's
output included), ``runs-on`` per matrix entry, workflow/job/step ``env:``, ``defaults.run``,
``timeout-minutes``, ``continue-on-error`` and ``fail-fast``. ``run:`` steps are executed
with bash exactly as written (``bash --noprofile --norc -eo pipefail``) in a fresh
workspace per job, with the files the runner provides (``GITHUB_OUTPUT``, ``GITHUB_ENV``,
``GITHUB_PATH``, ``GITHUB_STEP_SUMMARY``, ``GITHUB_EVENT_PATH``) and its variables
(``RUNNER_TEMP``, ``RUNNER_OS``, ``CI``, ...). ``uses:`` steps go to the stand-ins in
:mod:`tests.gha.actions`.

Jobs (or matrix entries) whose ``runs-on`` names a Windows or macOS image or a self-hosted
runner are not run here: they are reported as such, and count as passed for the jobs that
need them, so the rest of the chain still runs for the Linux entries.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.gha.actions import ACTIONS, ActionError, Host, action_key
from tests.gha.expressions import ExpressionError, Status, Value, condition, interpolate, to_string
from tests.gha.model import Trigger, WorkflowError, as_map, as_str_map, load_workflow, tag_matches, validate_inputs

__all__ = ["LegResult", "RunOptions", "RunReport", "run_workflow"]

_HOST_ENV_DROP = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX", "PIP_REQUIRE_VIRTUALENV")
_HOST_ENV_DROP_PREFIX = ("GITHUB_", "RUNNER_", "NOX_", "ACTIONS_")


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    workflow: Path
    repo: Path
    out: Path  # everything the run writes: workspaces, artifacts, pages, summaries
    trigger: Trigger
    vars: Mapping[str, str] = field(default_factory=dict)
    repository: str = "dswheels/dswheels"
    api_url: str = "https://api.github.com"  # GitHub's REST API as the jobs see it (a loopback fake in tests)
    token: str = ""  # github.token (a fake's token in tests; empty: the jobs have none)
    host_env: Mapping[str, str] | None = None  # the machine's environment (default: os.environ)
    say: Callable[[str], None] = print


@dataclass(frozen=True, kw_only=True)
class LegResult:
    job: str
    name: str
    result: str  # success failure skipped cancelled | not-here (needs another kind of runner)
    reason: str = ""
    seconds: float = 0.0


@dataclass(kw_only=True)
class RunReport:
    legs: list[LegResult] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)  # job id -> needs.<job>.result
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    out: Path = Path()

    @property
    def ok(self) -> bool:
        return all(r in ("success", "skipped") for r in self.results.values())

    def table(self) -> str:
        width = max((len(leg.name) for leg in self.legs), default=10)
        lines = [f"{'job'.ljust(width)}  result     time   note"]
        for leg in self.legs:
            seconds = f"{leg.seconds:5.0f}s" if leg.seconds else "     -"
            lines.append(f"{leg.name.ljust(width)}  {leg.result.ljust(9)} {seconds}   {leg.reason}".rstrip())
        return "\n".join(lines)


# --- the machine --------------------------------------------------------------------------------


def _runner_kind(labels: list[str]) -> str | None:
    """None when this machine can stand in for the runner, else why not."""
    lowered = [label.lower() for label in labels]
    if "self-hosted" in lowered:
        return f"needs a self-hosted runner labelled {', '.join(labels)}"
    if any(label.startswith(("windows", "macos")) for label in lowered):
        return f"needs a {labels[0]} runner"
    if not all(label.startswith("ubuntu-") for label in lowered):
        return f"unknown runner labels {labels}"
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return "this machine is not Linux x86_64"
    return None


def _image_tools(labels: list[str], tools: Path, env: Mapping[str, str], say: Callable[[str], None]) -> list[str]:
    """What the runner image has and this machine lacks, as shims: ``gcc-N``/``g++-N`` -> the local compiler.

    The image's GCC majors are compat.yml's ``runner_images`` facts; a workflow that sets
    ``CC=gcc-13`` then runs here with this machine's GCC, and says so.
    """
    from dswheels.core.compat import load_compat

    images = load_compat().runner_images
    gccs = [gcc for label in labels if label in images for gcc in images[label].gcc]
    path = env.get("PATH", "")
    missing = [n for n in gccs if shutil.which(f"gcc-{n}", path=path) is None]
    if not missing:
        return []
    local = shutil.which("gcc", path=path)
    local_cxx = shutil.which("g++", path=path)
    if local is None or local_cxx is None:
        return []
    bin_dir = tools / "image-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for n in missing:
        for name, target in ((f"gcc-{n}", local), (f"g++-{n}", local_cxx)):
            # a link, not a script: compiler caches key on the compiler's identity (mtime, size)
            shim = bin_dir / name
            shim.unlink(missing_ok=True)
            shim.symlink_to(Path(target).resolve())
    version = subprocess.run([local, "-dumpversion"], capture_output=True, text=True, check=False).stdout.strip()
    say(
        f"   note: {', '.join(labels)} has GCC {', '.join(gccs)}; this machine has GCC {version}: "
        f"gcc-/g++-{'/'.join(missing)} stand in for it here"
    )
    return [str(bin_dir)]


def _host_env(options: RunOptions) -> dict[str, str]:
    """The machine's environment minus this process's venv and any CI variables it runs under."""
    env = dict(options.host_env if options.host_env is not None else os.environ)
    venv = env.get("VIRTUAL_ENV")
    for name in list(env):
        if name in _HOST_ENV_DROP or name.startswith(_HOST_ENV_DROP_PREFIX):
            del env[name]
    if venv:
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(venv))
    return env


def _read_file_commands(path: Path) -> dict[str, str]:
    """``name=value`` and ``name<<DELIM ... DELIM`` lines (GITHUB_OUTPUT, GITHUB_ENV)."""
    values: dict[str, str] = {}
    if not path.exists():
        return values
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body: list[str] = []
            while i < len(lines) and lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise WorkflowError(f"{path.name}: {name}<<{delimiter} is never closed")
            i += 1
            values[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            values[name] = value
        else:
            raise WorkflowError(f"{path.name}: cannot read line {line!r}")
    return values


# --- matrices ------------------------------------------------------------------------------------


def _expand_matrix(matrix: Value) -> list[dict[str, Value]]:
    """GitHub's rules: the product of the axes, minus ``exclude``, then each ``include`` merged or added."""
    spec = as_map(matrix, "strategy.matrix")
    include = spec.get("include") or []
    exclude = spec.get("exclude") or []
    if not isinstance(include, list) or not isinstance(exclude, list):
        raise WorkflowError("strategy.matrix: include and exclude must be lists")
    axes = {k: v for k, v in spec.items() if k not in ("include", "exclude")}
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise WorkflowError(f"strategy.matrix.{key}: expected a non-empty list")
    keys = list(axes)
    lists = [axes[k] for k in keys]
    combos: list[dict[str, Value]] = (
        [dict(zip(keys, values, strict=True)) for values in itertools.product(*lists)]  # type: ignore[arg-type]
        if axes
        else []
    )
    for rule in exclude:
        rule_map = as_map(rule, "strategy.matrix.exclude[]")
        combos = [c for c in combos if not all(c.get(k) == v for k, v in rule_map.items())]
    originals = [dict(c) for c in combos]
    for entry in include:
        extra = as_map(entry, "strategy.matrix.include[]")
        merged = False
        for combo, original in zip(combos[: len(originals)], originals, strict=True):  # added ones never match
            if all(original.get(k, v) == v for k, v in extra.items() if k in axes):
                combo.update(extra)
                merged = True
        if not merged:
            combos.append(dict(extra))
    if not combos:
        raise WorkflowError("strategy.matrix expands to no jobs (GitHub fails the run: 'Matrix vector ... no values')")
    return combos


# --- running -------------------------------------------------------------------------------------


class _Run:
    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.workflow = load_workflow(options.workflow)
        self.out = options.out.resolve()
        self.report = RunReport(out=self.out)
        self.run_id = str(int(time.time()))
        self.sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=options.repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        self.host_env = _host_env(options)

    # -- set-up

    def _trigger_contexts(self) -> dict[str, Value]:
        on = self.workflow.get("on")
        triggers = as_map(on, "on") if isinstance(on, dict) else {str(on): None}
        trigger = self.options.trigger
        if trigger.event not in triggers:
            raise WorkflowError(f"the workflow has no {trigger.event} trigger (it has: {', '.join(triggers)})")
        inputs: dict[str, Value] = {}
        if trigger.event == "push":
            if trigger.ref_type != "tag":
                raise WorkflowError("the dry run pushes tags only: give --ref refs/tags/...")
            patterns = as_map(triggers["push"], "on.push").get("tags") or []
            if not isinstance(patterns, list) or not tag_matches(trigger.ref_name, [str(p) for p in patterns]):
                raise WorkflowError(f"tag {trigger.ref_name!r} does not match on.push.tags {patterns}")
        elif trigger.event == "workflow_dispatch":
            declared = as_map(as_map(triggers["workflow_dispatch"], "on.workflow_dispatch").get("inputs"), "inputs")
            inputs = validate_inputs(declared, trigger.inputs or {})
        elif trigger.event == "schedule":
            if trigger.ref_type != "branch":
                raise WorkflowError("a scheduled run is on the default branch: give --ref refs/heads/...")
        else:
            raise WorkflowError(f"the dry run knows push, workflow_dispatch and schedule, not {trigger.event}")
        owner, _, name = self.options.repository.partition("/")
        event: dict[str, Value] = {
            "ref": trigger.ref,
            "repository": {"name": name, "full_name": self.options.repository, "owner": {"login": owner}},
        }
        if trigger.event == "workflow_dispatch":
            event["inputs"] = {k: to_string(v) for k, v in inputs.items()}
        github: dict[str, Value] = {
            "event_name": trigger.event,
            "event": event,
            "ref": trigger.ref,
            "ref_name": trigger.ref_name,
            "ref_type": trigger.ref_type,
            "sha": self.sha,
            "repository": self.options.repository,
            "repository_owner": owner,
            "run_id": self.run_id,
            "run_number": "1",
            "run_attempt": "1",
            "workflow": str(self.workflow.get("name") or self.options.workflow.name),
            "server_url": "https://github.com",
            "api_url": self.options.api_url,
            "actor": "dry-run",
            "token": self.options.token,
        }
        return {"github": github, "inputs": inputs, "vars": dict(self.options.vars), "secrets": {}}

    # -- jobs

    def run(self) -> RunReport:
        base = self._trigger_contexts()
        (self.out / "event.json").parent.mkdir(parents=True, exist_ok=True)
        (self.out / "event.json").write_text(json.dumps(as_map(base["github"], "github")["event"]), encoding="utf-8")
        jobs = as_map(self.workflow["jobs"], "jobs")
        done: set[str] = set()
        while len(done) < len(jobs):
            ready = [
                job_id for job_id, spec in jobs.items() if job_id not in done and set(self._needs(job_id, spec)) <= done
            ]
            if not ready:
                raise WorkflowError(f"needs: cycle or unknown job among {sorted(set(jobs) - done)}")
            for job_id in ready:
                self._run_job(job_id, as_map(jobs[job_id], f"jobs.{job_id}"), base)
                done.add(job_id)
        return self.report

    @staticmethod
    def _needs(job_id: str, spec: Value) -> list[str]:
        needs = as_map(spec, f"jobs.{job_id}").get("needs") or []
        if isinstance(needs, str):
            return [needs]
        if not isinstance(needs, list):
            raise WorkflowError(f"jobs.{job_id}.needs: expected a job id or a list")
        return [str(n) for n in needs]

    def _run_job(self, job_id: str, spec: dict[str, Value], base: dict[str, Value]) -> None:
        needs = self._needs(job_id, spec)
        results = [self.report.results[n] for n in needs]
        contexts: dict[str, Value] = {
            **base,
            "needs": {n: {"result": self.report.results[n], "outputs": dict(self.report.outputs[n])} for n in needs},
        }
        # for a job, success() means every needed job succeeded (a skipped one does not count)
        status = Status(
            success=all(r == "success" for r in results),
            failure="failure" in results,
            cancelled="cancelled" in results,
        )
        self.report.outputs[job_id] = {}
        if not condition(spec.get("if"), contexts, status):  # type: ignore[arg-type]
            self.options.say(f"\n== {job_id}: skipped (if: {spec.get('if', 'success()')}; needs: {', '.join(results)})")
            self.report.results[job_id] = "skipped"
            self.report.legs.append(LegResult(job=job_id, name=job_id, result="skipped", reason="its if: is false"))
            return
        strategy = as_map(spec.get("strategy"), f"jobs.{job_id}.strategy")
        combos: list[dict[str, Value]] = [{}]
        if "matrix" in strategy:
            matrix = strategy["matrix"]
            if isinstance(matrix, str):
                matrix = interpolate(matrix, contexts)
            elif isinstance(matrix, dict):
                matrix = {k: interpolate(v, contexts) if isinstance(v, str) else v for k, v in matrix.items()}
            combos = _expand_matrix(matrix)
        fail_fast = strategy.get("fail-fast", True) is not False
        leg_results: list[str] = []
        for index, combo in enumerate(combos):
            if fail_fast and "failure" in leg_results:
                leg_results.append("cancelled")
                self.report.legs.append(LegResult(job=job_id, name=job_id, result="cancelled", reason="fail-fast"))
                continue
            leg_contexts: dict[str, Value] = {
                **contexts,
                "matrix": combo,
                "strategy": {"fail-fast": fail_fast, "job-index": index, "job-total": len(combos)},
            }
            result, outputs = self._run_leg(job_id, spec, leg_contexts, index)
            leg_results.append(result)
            # a matrix job's outputs: the last non-empty value of each wins (as on GitHub)
            self.report.outputs[job_id].update({k: v for k, v in outputs.items() if v})
        if "failure" in leg_results:
            self.report.results[job_id] = "failure"
        elif "cancelled" in leg_results:
            self.report.results[job_id] = "cancelled"
        else:
            self.report.results[job_id] = "success"

    def _run_leg(
        self, job_id: str, spec: dict[str, Value], contexts: dict[str, Value], index: int
    ) -> tuple[str, dict[str, str]]:
        say = self.options.say
        name = to_string(interpolate(str(spec.get("name") or job_id), contexts))
        runs_on = spec.get("runs-on")
        if isinstance(runs_on, str):
            runs_on = interpolate(runs_on, contexts)
        labels = [runs_on] if isinstance(runs_on, str) else [to_string(x) for x in runs_on or []]  # type: ignore[union-attr]
        elsewhere = _runner_kind(labels)
        if elsewhere is not None:
            say(f"\n== {name}: not run here ({elsewhere})")
            self.report.legs.append(LegResult(job=job_id, name=name, result="not-here", reason=elsewhere))
            return "success", {}
        if spec.get("container") or spec.get("services"):
            raise WorkflowError(f"jobs.{job_id}: container/services are not emulated")
        leg = _Leg(self.out / "jobs" / f"{job_id}-{index}", self.out / "toolcache")
        say(f"\n== {name} (runs-on {', '.join(labels)}; here)")
        github = {**as_map(contexts["github"], "github"), "job": job_id, "workspace": str(leg.workspace)}
        runner: dict[str, Value] = {
            "os": "Linux",
            "arch": "X64",
            "name": "dry-run",
            "temp": str(leg.temp),
            "tool_cache": str(leg.tool_cache),
            "environment": "github-hosted",
        }
        contexts = {**contexts, "runner": runner, "github": github}
        for level in (self.workflow.get("env"), spec.get("env")):
            for key, value in as_str_map(level, "env").items():
                leg.env[key] = to_string(interpolate(value, {**contexts, "env": dict(leg.env)}))
        leg.defaults = as_map(as_map(self.workflow.get("defaults"), "defaults").get("run"), "defaults.run")
        leg.defaults |= as_map(as_map(spec.get("defaults"), f"jobs.{job_id}.defaults").get("run"), "defaults.run")
        leg.deadline = time.monotonic() + float(spec.get("timeout-minutes", 360)) * 60  # type: ignore[arg-type]
        leg.path = _image_tools(labels, leg.root, self.host_env, say)
        steps: dict[str, Value] = {}
        start = time.monotonic()
        for number, step_value in enumerate(spec.get("steps") or []):  # type: ignore[arg-type]
            step = as_map(step_value, f"jobs.{job_id}.steps[{number}]")
            step_ctx: dict[str, Value] = {
                **contexts,
                "env": dict(leg.env),
                "steps": steps,
                "job": {"status": "failure" if leg.failed else "success"},
            }
            status = Status(success=not leg.failed, failure=leg.failed)
            title = to_string(interpolate(_title(step), step_ctx))
            if not condition(step.get("if"), step_ctx, status):  # type: ignore[arg-type]
                say(f"-- {title}: skipped")
                if step.get("id"):
                    steps[str(step["id"])] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
                continue
            say(f"-- {title}")
            step_env = dict(leg.env)
            for key, value in as_str_map(step.get("env"), "env").items():
                step_env[key] = to_string(interpolate(value, step_ctx))
            outcome, outputs = self._run_step(step, step_ctx, step_env, leg)
            continue_on_error = step.get("continue-on-error", False)
            if isinstance(continue_on_error, str):
                continue_on_error = condition(continue_on_error, step_ctx, status)
            conclusion = "success" if outcome == "success" or continue_on_error is True else "failure"
            if step.get("id"):
                steps[str(step["id"])] = {"outputs": dict(outputs), "outcome": outcome, "conclusion": conclusion}
            leg.failed = leg.failed or conclusion == "failure"
        out_ctx: dict[str, Value] = {**contexts, "env": dict(leg.env), "steps": steps}
        job_outputs = {
            key: to_string(interpolate(str(value), out_ctx))
            for key, value in as_map(spec.get("outputs"), f"jobs.{job_id}.outputs").items()
        }
        result = "failure" if leg.failed else "success"
        seconds = time.monotonic() - start
        note = f"summary: {leg.summary}" if leg.summary.exists() else ""
        self.report.legs.append(LegResult(job=job_id, name=name, result=result, seconds=seconds, reason=note))
        say(f"== {name}: {result} in {seconds:.0f}s")
        return result, job_outputs

    def _step_env(self, leg: _Leg, contexts: dict[str, Value], step_env: dict[str, str]) -> dict[str, str]:
        """The machine's environment plus what the runner sets, the workflow's env and GITHUB_PATH."""
        trigger = self.options.trigger
        env = dict(self.host_env)
        env.update(
            {
                "CI": "true",
                "GITHUB_ACTIONS": "true",
                "GITHUB_WORKSPACE": str(leg.workspace),
                "GITHUB_OUTPUT": str(leg.files["OUTPUT"]),
                "GITHUB_ENV": str(leg.files["ENV"]),
                "GITHUB_PATH": str(leg.files["PATH"]),
                "GITHUB_STEP_SUMMARY": str(leg.files["SUMMARY"]),
                "GITHUB_EVENT_NAME": trigger.event,
                "GITHUB_EVENT_PATH": str(self.out / "event.json"),
                "GITHUB_REF": trigger.ref,
                "GITHUB_REF_NAME": trigger.ref_name,
                "GITHUB_REF_TYPE": trigger.ref_type,
                "GITHUB_SHA": self.sha,
                "GITHUB_REPOSITORY": self.options.repository,
                "GITHUB_REPOSITORY_OWNER": self.options.repository.partition("/")[0],
                "GITHUB_RUN_ID": self.run_id,
                "GITHUB_RUN_ATTEMPT": "1",
                "GITHUB_JOB": to_string(as_map(contexts["github"], "github").get("job")),
                "GITHUB_SERVER_URL": "https://github.com",
                "GITHUB_API_URL": self.options.api_url,
                "RUNNER_OS": "Linux",
                "RUNNER_ARCH": "X64",
                "RUNNER_TEMP": str(leg.temp),
                "RUNNER_TOOL_CACHE": str(leg.tool_cache),
            }
        )
        env.update(step_env)
        env["PATH"] = os.pathsep.join([*leg.path, env.get("PATH", "")])
        return env

    def _run_step(
        self, step: dict[str, Value], contexts: dict[str, Value], step_env: dict[str, str], leg: _Leg
    ) -> tuple[str, dict[str, str]]:
        """Run one step; returns (outcome, outputs) and applies its GITHUB_ENV/GITHUB_PATH to the leg."""
        leg.new_files()
        env = self._step_env(leg, contexts, step_env)
        if "uses" in step:
            return self._run_action(str(step["uses"]), step, contexts, env, leg)
        try:
            script = to_string(interpolate(str(step.get("run", "")), contexts))
        except ExpressionError as exc:
            raise WorkflowError(f"run: {exc}") from None
        shell = str(step.get("shell") or leg.defaults.get("shell") or "bash")
        if shell not in ("bash", "sh"):
            raise WorkflowError(f"shell: {shell} cannot run here (a Linux job reached a {shell} step; check its if:)")
        script_file = leg.temp / f"step-{uuid.uuid4().hex[:8]}.sh"
        script_file.write_text(script, encoding="utf-8")
        cwd = leg.workspace / str(step.get("working-directory") or leg.defaults.get("working-directory") or ".")
        argv = (
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)]
            if shell == "bash"
            else ["sh", "-e", str(script_file)]
        )
        timeout = leg.deadline - time.monotonic()
        if step.get("timeout-minutes") is not None:
            timeout = min(timeout, float(step["timeout-minutes"]) * 60)  # type: ignore[arg-type]
        sys.stdout.flush()
        try:
            code = subprocess.run(argv, cwd=cwd, env=env, timeout=max(timeout, 1), check=False).returncode
        except subprocess.TimeoutExpired:
            self.options.say("   error: the step ran past its timeout-minutes")
            code = 124
        outputs = leg.collect()
        if code != 0:
            self.options.say(f"   error: the step exited with {code}")
            return "failure", outputs
        return "success", outputs

    def _run_action(
        self, uses: str, step: dict[str, Value], contexts: dict[str, Value], env: dict[str, str], leg: _Leg
    ) -> tuple[str, dict[str, str]]:
        handler = ACTIONS.get(action_key(uses))
        if handler is None:
            raise WorkflowError(f"uses: {uses} has no stand-in in tests/gha/actions.py; add one")
        with_ = {k: to_string(interpolate(v, contexts)) for k, v in as_str_map(step.get("with"), "with").items()}
        host = Host(
            repo=self.options.repo.resolve(),
            workspace=leg.workspace,
            temp=leg.temp,
            tool_cache=leg.tool_cache,
            artifacts=self.out / "artifacts",
            pages=self.out / "pages",
            env=env,
            say=lambda m: self.options.say(f"   {m}"),
        )
        host.artifacts.mkdir(parents=True, exist_ok=True)
        try:
            outputs = handler(host, with_)
        except ActionError as exc:
            self.options.say(f"   error: {exc}")
            return "failure", {}
        leg.env.update(host.exported_env)
        leg.path = list(reversed(host.exported_path)) + leg.path
        return "success", outputs


def _title(step: dict[str, Value]) -> str:
    if step.get("name"):
        return str(step["name"])
    if step.get("uses"):
        return f"uses {action_key(str(step['uses']))}"
    return str(step.get("run", "")).strip().splitlines()[0]


class _Leg:
    """One job (or one matrix entry of it) on this machine: its directories, env, PATH and status."""

    def __init__(self, root: Path, tool_cache: Path) -> None:
        self.root = root
        self.workspace = root / "workspace"
        self.temp = root / "temp"
        self.tool_cache = tool_cache
        self.summary = root / "summary.md"
        for d in (self.workspace, self.temp, self.tool_cache):
            d.mkdir(parents=True, exist_ok=True)
        self.env: dict[str, str] = {}  # workflow + job env, then GITHUB_ENV additions
        self.path: list[str] = []  # GITHUB_PATH additions, newest first
        self.defaults: dict[str, Value] = {}
        self.deadline = 0.0
        self.failed = False
        self.files: dict[str, Path] = {}

    def new_files(self) -> None:
        """Fresh GITHUB_OUTPUT/ENV/PATH/STEP_SUMMARY files for the next step (the runner's own are per step)."""
        self.files = {
            n: self.temp / f"_{n.lower()}_{uuid.uuid4().hex[:8]}" for n in ("OUTPUT", "ENV", "PATH", "SUMMARY")
        }
        for file in self.files.values():
            file.touch()

    def collect(self) -> dict[str, str]:
        """Apply the step's GITHUB_ENV and GITHUB_PATH, keep its summary; its outputs."""
        self.env.update(_read_file_commands(self.files["ENV"]))
        added = [line for line in self.files["PATH"].read_text(encoding="utf-8").splitlines() if line.strip()]
        self.path = list(reversed(added)) + self.path
        text = self.files["SUMMARY"].read_text(encoding="utf-8")
        if text:
            with self.summary.open("a", encoding="utf-8") as fh:
                fh.write(text)
        return _read_file_commands(self.files["OUTPUT"])


def run_workflow(options: RunOptions) -> RunReport:
    return _Run(options).run()
