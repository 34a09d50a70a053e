"""The wheel-request issue form (.github/ISSUE_TEMPLATE/wheel-request.yml), read back from the issue's body.

GitHub renders a form's answers as markdown: each field as ``### <label>``, a blank line, the answer
(``_No response_`` for an empty optional one). The body is what anyone can write, and edit later, so
it is read as hostile: bounded, every answer one short line matched by an ASCII-only pattern (``\\d``
and ``int()`` take Arabic-Indic or fullwidth digits), and nothing of it is ever echoed back: a problem
names the field and what was expected, never the text given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.versions import TorchMinor, VersionTuple, format_version

__all__ = [
    "BUILD_LABEL",
    "FIELDS",
    "FORM_LABEL",
    "MAX_BODY_CHARS",
    "OS_CHOICES",
    "RequestFormError",
    "WheelRequest",
    "parse_form",
]

FORM_LABEL = "wheel-request"  # the form puts it on every issue it opens: the issues the request workflow answers
BUILD_LABEL = "build-wheel"  # a maintainer's label (triage or write access): build the requested wheel

# field id -> the label the form shows, which is the body's heading (a test holds the template to these)
FIELDS = {
    "deepspeed": "DeepSpeed version",
    "torch": "torch version, as torch.__version__ prints it",
    "python": "Python version",
    "os": "Operating system",
}
OS_CHOICES = {"Windows (x86_64)": Platform.WIN_AMD64, "Linux (x86_64)": Platform.LINUX_X86_64}
MAX_BODY_CHARS = 16_384  # the form's answers take a few hundred characters; GitHub allows 65,536
_MAX_ANSWER = 64
_NO_RESPONSE = "_No response_"

# ASCII only: a request names releases, and a lookalike digit must not pass for one
_DEEPSPEED = re.compile(r"v?([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,4})", re.ASCII)
_TORCH = re.compile(
    r"([0-9]{1,2})\.([0-9]{1,3})(?:\.[0-9]{1,3})?(?:(?:a|b|rc|\.dev|\.post)[0-9]{1,8})?\+([a-z0-9]{2,8})", re.ASCII
)
_PYTHON = re.compile(r"3\.([0-9]{1,2})(?:\.[0-9]{1,3})?(t?)", re.ASCII)
_VARIANT = re.compile(r"cpu|cu[0-9]{2,3}", re.ASCII)


class RequestFormError(ConfigError):
    """The issue's body is not a filled-in wheel-request form; ``problems`` says what, one line per field."""

    def __init__(self, problems: tuple[str, ...]) -> None:
        super().__init__("the issue does not read as a wheel request", details="\n".join(problems))
        self.problems = problems


@dataclass(frozen=True, kw_only=True, slots=True)
class WheelRequest:
    """One wheel asked for: a cell, and the torch release the asker has (its patch is not part of the cell)."""

    deepspeed: VersionTuple
    torch: TorchMinor
    variant: Variant
    python: Python
    platform: Platform

    @property
    def cell(self) -> Cell:
        return Cell(
            deepspeed=self.deepspeed, torch=self.torch, variant=self.variant, python=self.python, platform=self.platform
        )

    def describe(self) -> str:
        """``DeepSpeed 0.19.8, torch 2.9 (cu128), Python 3.12, win_amd64``: built from the parsed values only."""
        return (
            f"DeepSpeed {format_version(self.deepspeed)}, torch {format_version(self.torch)} ({self.variant.name}), "
            f"Python {self.python.version[0]}.{self.python.version[1]}{'t' if self.python.free_threaded else ''}, "
            f"{self.platform.value}"
        )


def _sections(body: str) -> tuple[dict[str, list[str]], set[str]]:
    """Each ``### heading``'s answer lines (blank lines dropped), and the headings given more than once."""
    answers: dict[str, list[str]] = {}
    twice: set[str] = set()
    current: list[str] | None = None
    for raw in body.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.strip()
        if line.startswith("### "):
            heading = line[4:].strip()
            if heading in answers:
                twice.add(heading)
            current = answers.setdefault(heading, [])
        elif current is not None and line:
            current.append(line)
    return answers, twice


def _answer(answers: dict[str, list[str]], twice: set[str], field: str, problems: list[str]) -> str | None:
    heading = FIELDS[field]
    lines = answers.get(heading)
    if heading in twice:
        problems.append(f"{heading}: given twice")
        return None
    if lines is None:
        problems.append(f"{heading}: missing (open the issue with the wheel-request form)")
        return None
    if not lines or lines == [_NO_RESPONSE]:
        problems.append(f"{heading}: no answer")
        return None
    if len(lines) > 1 or len(lines[0]) > _MAX_ANSWER:
        problems.append(f"{heading}: expected one short line")
        return None
    return lines[0].strip("`'\" ")  # pasted as code or quoted: the value inside


def _deepspeed(text: str, problems: list[str]) -> VersionTuple | None:
    match = _DEEPSPEED.fullmatch(text)
    if match is None:
        problems.append(f"{FIELDS['deepspeed']}: expected a release such as 0.19.8")
        return None
    return (int(match[1]), int(match[2]), int(match[3]))


def _torch(text: str, problems: list[str]) -> tuple[TorchMinor, Variant] | None:
    match = _TORCH.fullmatch(text)
    if match is None or _VARIANT.fullmatch(match[3]) is None:
        problems.append(
            f'{FIELDS["torch"]}: expected what `python -c "import torch; print(torch.__version__)"` prints, '
            "such as 2.9.1+cu128 or 2.9.1+cpu (the part after + says which torch build you have)"
        )
        return None
    return TorchMinor((int(match[1]), int(match[2]))), Variant.parse(match[3])


def _python(text: str, problems: list[str]) -> Python | None:
    match = _PYTHON.fullmatch(text)
    if match is None:
        problems.append(f"{FIELDS['python']}: expected such as 3.12 (3.13t for a free-threaded Python)")
        return None
    return Python(version=(3, int(match[1])), free_threaded=bool(match[2]))


def parse_form(body: str | None) -> WheelRequest:
    """The request the form's answers make; :class:`RequestFormError` names every field that does not read."""
    if not body:
        raise RequestFormError(("the issue has no body: open it with the wheel-request form",))
    if len(body) > MAX_BODY_CHARS:
        raise RequestFormError((f"the issue's body is longer than a filled-in form ({MAX_BODY_CHARS} characters)",))
    answers, twice = _sections(body)
    problems: list[str] = []
    values = {field: _answer(answers, twice, field, problems) for field in FIELDS}
    deepspeed = _deepspeed(values["deepspeed"], problems) if values["deepspeed"] is not None else None
    torch = _torch(values["torch"], problems) if values["torch"] is not None else None
    python = _python(values["python"], problems) if values["python"] is not None else None
    platform = OS_CHOICES.get(values["os"] or "")
    if values["os"] is not None and platform is None:
        problems.append(f"{FIELDS['os']}: expected one of {', '.join(OS_CHOICES)}")
    if problems or deepspeed is None or torch is None or python is None or platform is None:
        raise RequestFormError(tuple(problems))
    return WheelRequest(deepspeed=deepspeed, torch=torch[0], variant=torch[1], python=python, platform=platform)
