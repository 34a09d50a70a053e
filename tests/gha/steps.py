"""Run a workflow's own steps here, one at a time: what the chain tests need of GitHub's runner.

With the logic in dswheels, a workflow step is one command line wired to its inputs. The chain
tests (tests/integration/test_workflow_chain.py, test_follow_chain.py) run those lines as
written, in the order the jobs run, to prove the wiring end to end: :func:`run_step` resolves a
step's ``env:`` (workflow, job, step) with the expression evaluator, checks its ``if:``, runs its
``run:`` script with bash as the runner does and reads back its ``GITHUB_OUTPUT``, and what it
wrote to ``GITHUB_ENV`` and ``GITHUB_PATH`` for the job's later steps. The jobs'
order, their ``needs`` outputs and matrix entries are the test's to give; the artifacts that
pass between jobs go through :class:`Artifacts`, which follows upload-artifact's and
download-artifact's path rules for the inputs the workflows use. The ``uses:`` actions
themselves (checkout, setup-python, MSVC's environment, ...) are not run: the structural tests
(tests/unit/test_workflows.py) check how they are called.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.gha.expressions import Status, Value, condition, interpolate, to_string
from tests.gha.model import WorkflowError, as_map, as_str_map, load_workflow, read_file_commands

__all__ = [
    "NOT_RUN_HERE",
    "SETUP_STEPS",
    "Artifacts",
    "Caches",
    "Job",
    "JobRun",
    "StepRun",
    "called_job",
    "reusable",
    "run_job",
]

_HOST_DROP_PREFIX = ("GITHUB_", "RUNNER_", "INPUT_", "DSWHEELS_", "ACTIONS_")
REPOSITORY = Path(__file__).resolve().parents[2]  # where a job's ``uses: ./...`` is found


@dataclass(frozen=True, kw_only=True)
class StepRun:
    ran: bool  # False: its if: was false
    outputs: dict[str, str]
    summary: str
    stdout: str


@dataclass(kw_only=True)
class Job:
    """One job (one matrix entry) of a workflow, run here in ``workspace`` with ``contexts``.

    ``contexts`` holds ``github``, ``vars``, ``inputs``, ``needs`` and ``matrix`` as the test
    wants them; ``github`` also gives the runner's GITHUB_* variables.
    """

    workflow: dict[str, Value]
    job: str
    workspace: Path
    contexts: dict[str, Value]
    extra_env: Mapping[str, str] = field(default_factory=dict)  # the machine (caches, ...)
    stand_ins: Path | None = None  # programs the job's image has and this machine lacks (dnf), last on PATH
    runs: dict[str, StepRun] = field(default_factory=dict)  # the run: steps so far, by id (else name)
    exported: dict[str, str] = field(default_factory=dict)  # GITHUB_ENV of the steps so far
    paths: list[str] = field(default_factory=list)  # GITHUB_PATH of the steps so far, first first

    def __post_init__(self) -> None:
        self.name = self.job  # the workflow's job, also when what runs is the job of a workflow it calls
        called = called_job(self.workflow, self.job, self.contexts)
        if called is not None:  # a job that calls a reusable workflow runs that workflow's job, as GitHub does
            self.workflow, self.job, self.contexts = called
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.temp = self.workspace.parent / f"{self.workspace.name}-temp"
        self.temp.mkdir(exist_ok=True)

    @property
    def spec(self) -> dict[str, Value]:
        return as_map(as_map(self.workflow["jobs"], "jobs").get(self.job), f"jobs.{self.job}")

    @property
    def container(self) -> str:
        """The job's ``container:`` image as the runner resolves it ("": the steps run on the runner itself).

        The steps run here all the same: this machine stands in for the container (the tests say which steps
        only a runner proves); the image is for the test to check."""
        value = self.spec.get("container")
        if value is None:
            return ""
        return to_string(interpolate(str(value), self.contexts))

    def step(self, name: str) -> dict[str, Value]:
        """The step named (or with the id) ``name``, or the ``uses:`` step of that action."""
        for index, value in enumerate(self.spec.get("steps") or []):  # type: ignore[arg-type]
            step = as_map(value, f"jobs.{self.job}.steps[{index}]")
            uses = str(step.get("uses", "")).split("@")[0].lower()
            if name in (step.get("name"), step.get("id")) or (uses and uses == name.lower()):
                return step
        raise WorkflowError(f"jobs.{self.job} has no step {name!r}")

    def step_contexts(self) -> dict[str, Value]:
        """The contexts a step's expressions see: the job's, its env, the outputs of the steps before it."""
        env: dict[str, Value] = {**self.env()}
        steps: dict[str, Value] = {
            sid: {"outputs": dict(run.outputs), "outcome": "success" if run.ran else "skipped"}
            for sid, run in self.runs.items()
        }
        runner: dict[str, Value] = {"temp": str(self.temp), **as_map(self.contexts.get("runner") or {}, "runner")}
        return {**self.contexts, "runner": runner, "env": env, "steps": steps}

    def env(self) -> dict[str, str]:
        """The workflow's and the job's ``env:``, resolved (the ``env`` context of its steps)."""
        env: dict[str, str] = {}
        for level in (self.workflow.get("env"), self.spec.get("env")):
            for key, value in as_str_map(level, "env").items():
                env[key] = to_string(interpolate(value, {**self.contexts, "env": dict(env)}))
        return env

    def with_(self, name: str) -> dict[str, str]:
        """A ``uses:`` step's inputs, resolved."""
        contexts = self.step_contexts()
        return {
            k: to_string(interpolate(v, contexts)) for k, v in as_str_map(self.step(name).get("with"), "with").items()
        }

    def _process_env(self, step_env: Mapping[str, str], files: Mapping[str, Path]) -> dict[str, str]:
        host = {k: v for k, v in os.environ.items() if not k.startswith(_HOST_DROP_PREFIX)}
        # this environment's console scripts (dswheels) first, as `pip install .` puts them on a runner;
        # before them what earlier steps added with GITHUB_PATH
        stand_ins = [str(self.stand_ins)] if self.stand_ins is not None else []
        host["PATH"] = os.pathsep.join(
            [*self.paths, str(Path(sys.executable).parent), host.get("PATH", ""), *stand_ins]
        )
        github = as_map(self.contexts.get("github"), "github")
        event = github.get("event")
        event_file = files.get("event")
        if isinstance(event, dict) and event_file is not None:  # the runner writes the event's payload to a file
            event_file.write_text(json.dumps(event), encoding="utf-8")
        runner = {
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_EVENT_NAME": to_string(github.get("event_name")),
            "GITHUB_REF_NAME": to_string(github.get("ref_name")),
            "GITHUB_REPOSITORY": to_string(github.get("repository")),
            "GITHUB_SHA": to_string(github.get("sha")),
            "GITHUB_API_URL": to_string(github.get("api_url")),
            "GITHUB_EVENT_PATH": str(event_file or ""),
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_RUN_ID": to_string(github.get("run_id")),
            "GITHUB_RUN_ATTEMPT": to_string(github.get("run_attempt")),
            "GITHUB_JOB": self.job,
            "GITHUB_OUTPUT": str(files["output"]),
            "GITHUB_STEP_SUMMARY": str(files["summary"]),
            "GITHUB_ENV": str(files["env"]),
            "GITHUB_PATH": str(files["path"]),
            "RUNNER_OS": "Linux",
            "RUNNER_TEMP": str(self.temp),
        }
        return {**host, **self.extra_env, **self.exported, **runner, **step_env}

    def run(self, name: str, *, status: Status | None = None) -> StepRun:
        """Run the ``run:`` step ``name`` as the runner would; a failing script raises."""
        step = self.step(name)
        env = self.env()
        contexts = self.step_contexts()
        if not condition(step.get("if"), contexts, status or Status()):  # type: ignore[arg-type]
            return StepRun(ran=False, outputs={}, summary="", stdout="")
        if "run" not in step:
            raise WorkflowError(f"jobs.{self.job}: {name!r} is a uses: step (its action does not run here)")
        for key, value in as_str_map(step.get("env"), "env").items():
            env[key] = to_string(interpolate(value, contexts))
        shell = str(step.get("shell") or as_map(as_map(self.workflow.get("defaults"), "d").get("run"), "r")["shell"])
        if shell != "bash":
            raise WorkflowError(f"jobs.{self.job}: {name!r} runs under {shell}, which does not run here")
        kinds = ("output", "summary", "env", "path", "event")
        files = {kind: self.temp / f"{kind}-{uuid.uuid4().hex[:8]}" for kind in kinds}
        for file in files.values():
            file.touch()
        script = to_string(interpolate(str(step["run"]), contexts))
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=self.workspace,
            env=self._process_env(env, files),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            tail = f"{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
            raise AssertionError(f"jobs.{self.job} step {name!r} exited with {done.returncode}:\n{tail}")
        self.exported.update(read_file_commands(files["env"]))
        added = [line for line in files["path"].read_text(encoding="utf-8").splitlines() if line]
        self.paths[:0] = reversed(added)  # the last one added comes first, as on a runner
        ran = StepRun(
            ran=True,
            outputs=read_file_commands(files["output"]),
            summary=files["summary"].read_text(encoding="utf-8"),
            stdout=done.stdout + done.stderr,
        )
        self.runs[str(step.get("id") or name)] = ran
        return ran

    def outputs(self) -> dict[str, str]:
        """The job's ``outputs:`` from its steps' outputs (``steps.<id>.outputs.<name>``)."""
        contexts = self.step_contexts()
        spec = as_map(self.spec.get("outputs"), f"jobs.{self.job}.outputs")
        return {key: to_string(interpolate(str(value), contexts)) for key, value in spec.items()}


def reusable(workflow: dict[str, Value], job: str) -> tuple[dict[str, Value], str] | None:
    """The reusable workflow of this repository a job calls (``uses: ./.github/workflows/X.yml``) and the
    name of its one job; None for a job with steps."""
    uses = as_map(as_map(workflow["jobs"], "jobs").get(job), f"jobs.{job}").get("uses")
    if not isinstance(uses, str):
        return None
    if not uses.startswith("./.github/workflows/"):
        raise WorkflowError(f"jobs.{job}: {uses}: only this repository's reusable workflows run here")
    called = load_workflow(REPOSITORY / uses)
    (name,) = as_map(called["jobs"], "jobs")  # one job: what the callers here need
    return called, name


def called_job(
    workflow: dict[str, Value], job: str, contexts: Mapping[str, Value]
) -> tuple[dict[str, Value], str, dict[str, Value]] | None:
    """For a job that calls a reusable workflow: that workflow, its job and the contexts the job sees
    (``github``, ``vars``, ``runner``, and ``inputs``: the caller's ``with:``, evaluated in the caller's
    contexts, typed by ``on.workflow_call``); None for a job with steps. The caller's ``env:``,
    ``matrix`` and ``needs`` do not reach it, as on GitHub."""
    found = reusable(workflow, job)
    if found is None:
        return None
    called, name = found
    trigger = as_map(as_map(called.get("on"), "on").get("workflow_call"), "on.workflow_call")
    declared = as_map(trigger.get("inputs"), "on.workflow_call.inputs")
    spec = as_map(as_map(workflow["jobs"], "jobs").get(job), f"jobs.{job}")
    inputs: dict[str, Value] = {}
    for key, value in as_str_map(spec.get("with"), f"jobs.{job}.with").items():
        if key not in declared:
            raise WorkflowError(f"jobs.{job}.with.{key}: {spec['uses']} declares no such input")
        text = to_string(interpolate(value, dict(contexts)))
        kind = as_map(declared[key], f"inputs.{key}").get("type")
        inputs[key] = (text == "true") if kind == "boolean" else text
    missing = [key for key, d in declared.items() if as_map(d, key).get("required") is True and key not in inputs]
    if missing:
        raise WorkflowError(f"jobs.{job}: {spec['uses']} needs the input(s) {', '.join(missing)}")
    seen = {key: contexts[key] for key in ("github", "vars", "runner") if key in contexts}
    return called, name, {**seen, "inputs": inputs}


class Artifacts:
    """A run's artifacts: upload-artifact's ``path`` (one file or directory, the root being the
    directory itself or the file's directory) and download-artifact's ``name`` or ``pattern``
    with ``merge-multiple``; with ``run-id`` (and a token), another run's, from ``runs``."""

    def __init__(self, root: Path, *, runs: Mapping[str, Path] | None = None) -> None:
        self.root = root
        self.runs = dict(runs or {})  # run id -> the root of that run's artifacts

    def upload(self, job: Job, step: str) -> None:
        with_ = job.with_(step)
        path = job.workspace / with_["path"]
        if any(c in with_["path"] for c in "*?[!\n"):
            raise WorkflowError(f"{step}: path {with_['path']!r}: only one file or directory is modelled here")
        target = self.root / with_["name"]
        if target.exists():
            raise WorkflowError(f"upload-artifact: an artifact named {with_['name']!r} already exists in this run")
        if path.is_dir() and any(path.iterdir()):
            shutil.copytree(path, target)
        elif path.is_file():
            target.mkdir(parents=True)
            shutil.copy2(path, target / path.name)
        elif with_.get("if-no-files-found") == "error":
            raise AssertionError(f"upload-artifact {with_['name']}: no files at {path}")

    def download(self, job: Job, step: str) -> None:
        with_ = job.with_(step)
        dest = job.workspace / with_.get("path", "")
        root = self.root
        if with_.get("run-id"):  # another run's artifacts: download-artifact needs a token that may read them
            if not with_.get("github-token"):
                raise WorkflowError(f"{step}: run-id without github-token reads this run's artifacts only")
            if with_["run-id"] not in self.runs:
                raise AssertionError(f"download-artifact: no run {with_['run-id']!r} (there are {sorted(self.runs)})")
            root = self.runs[with_["run-id"]]
        available = sorted(p.name for p in root.iterdir()) if root.exists() else []
        if with_.get("name"):
            if with_["name"] not in available:
                raise AssertionError(f"download-artifact: no artifact {with_['name']!r} (there are {available})")
            names, merge = [with_["name"]], True
        else:
            names = fnmatch.filter(available, with_.get("pattern") or "*")
            merge = with_.get("merge-multiple") == "true"
        for name in names:
            shutil.copytree(root / name, dest if merge else dest / name, dirs_exist_ok=True)


@dataclass(frozen=True)
class CacheEntry:
    key: str
    ref: str  # the ref whose run saved it: GitHub lets a run restore its own ref's entries and the default branch's
    job: str  # the job that saved it (what the tests count)
    folder: Path


class Caches:
    """A repository's Actions cache as actions/cache/restore and actions/cache/save (v4+) use it: a save
    creates one entry under its key (none when the key exists: entries are immutable, or the path is
    missing); a restore takes the entry of its exact key, else, for each of its restore-keys in order,
    the newest entry whose key starts with it, of the run's own ref or the default branch."""

    def __init__(self, root: Path, *, default_branch: str = "main") -> None:
        self.root = root
        self.default_branch = default_branch
        self.entries: list[CacheEntry] = []

    def _ref(self, job: Job) -> str:
        return to_string(as_map(job.contexts.get("github"), "github").get("ref_name"))

    def restore(self, job: Job, step: str) -> dict[str, str]:
        with_ = job.with_(step)
        refs = {self._ref(job), self.default_branch}
        visible = [e for e in self.entries if e.ref in refs]
        hit = next((e for e in visible if e.key == with_["key"]), None)
        matched = hit
        for prefix in [k.strip() for k in with_.get("restore-keys", "").splitlines() if k.strip()]:
            if matched is not None:
                break
            matched = next((e for e in reversed(visible) if e.key.startswith(prefix)), None)
        if matched is None:
            return {"cache-hit": "false"}
        shutil.copytree(matched.folder, job.workspace / with_["path"], dirs_exist_ok=True)
        return {
            "cache-hit": "true" if hit else "false",
            "cache-matched-key": matched.key,
            "cache-primary-key": with_["key"],
        }

    def save(self, job: Job, step: str) -> None:
        with_ = job.with_(step)
        path = job.workspace / with_["path"]
        if any(e.key == with_["key"] for e in self.entries) or not path.is_dir():
            return  # "Unable to reserve cache with key ...", or "Path Validation Error": no entry
        folder = self.root / uuid.uuid4().hex
        shutil.copytree(path, folder)
        self.entries.append(CacheEntry(key=with_["key"], ref=self._ref(job), job=job.name, folder=folder))


# the actions that set up a runner or talk to GitHub: not run here (tests/unit/test_workflows.py checks their use)
NOT_RUN_HERE = frozenset(
    {
        "actions/checkout",
        "actions/setup-python",
        "actions/cache/restore",  # unless the test gives run_job its Caches
        "actions/cache/save",
        "themrmilchmann/setup-msvc-dev",
        "mozilla-actions/sccache-action",
        "actions/attest",  # unless the test gives run_job an attestor
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    }
)
# run: steps that set up the runner: the test environment already is one (dswheels installed from this tree)
SETUP_STEPS = frozenset({"Install dswheels"})


@dataclass(frozen=True, kw_only=True)
class JobRun:
    ran: list[str]
    skipped: list[str]  # their if: was false
    not_here: list[str]
    steps: dict[str, StepRun]  # by id (else name): what each run: step did
    outputs: dict[str, str]  # the job's outputs:


Attestor = Callable[["Job", str], dict[str, str]]  # actions/attest's stand-in: (job, step) -> the step's outputs


def run_job(
    job: Job,
    artifacts: Artifacts,
    *,
    status: Status | None = None,
    caches: Caches | None = None,
    attestor: Attestor | None = None,
) -> JobRun:
    """Every step of ``job`` in order: ``run:`` steps, artifacts, (given ``caches``) the Actions cache and
    (given ``attestor``, a Sigstore instance of the test's own) actions/attest here, the other actions noted."""
    done = JobRun(ran=[], skipped=[], not_here=[], steps=job.runs, outputs={})
    for index, value in enumerate(job.spec.get("steps") or []):  # type: ignore[arg-type]
        step = as_map(value, f"jobs.{job.job}.steps[{index}]")
        uses = str(step.get("uses", "")).split("@")[0].lower()
        name = str(step.get("name") or uses)
        if not condition(step.get("if"), job.step_contexts(), status or Status()):  # type: ignore[arg-type]
            done.skipped.append(name)
        elif uses == "actions/upload-artifact":
            artifacts.upload(job, name)
            done.ran.append(name)
        elif uses == "actions/download-artifact":
            artifacts.download(job, name)
            done.ran.append(name)
        elif uses == "actions/cache/restore" and caches is not None:
            outputs = caches.restore(job, name)
            job.runs[str(step.get("id") or name)] = StepRun(ran=True, outputs=outputs, summary="", stdout="")
            done.ran.append(name)
        elif uses == "actions/cache/save" and caches is not None:
            caches.save(job, name)
            done.ran.append(name)
        elif uses == "actions/attest" and attestor is not None:
            outputs = attestor(job, name)
            job.runs[str(step.get("id") or name)] = StepRun(ran=True, outputs=outputs, summary="", stdout="")
            done.ran.append(name)
        elif uses in NOT_RUN_HERE or name in SETUP_STEPS:
            done.not_here.append(name)
        elif uses:
            raise WorkflowError(f"jobs.{job.job}: {uses} is neither run here nor listed in NOT_RUN_HERE")
        else:
            job.run(name, status=status)
            done.ran.append(name)
    done.outputs.update(job.outputs())
    return done
