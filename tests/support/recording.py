"""A reporter that keeps every event, so a test can read back what dswheels reported (a test double:
it does not ship in the package)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["RecordingReporter"]


@dataclass
class RecordingReporter:
    """Keeps every event, in order: ``(kind, text)``; :meth:`of` the texts of one kind."""

    events: list[tuple[str, str]] = field(default_factory=list)

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        self.events.append(("group", title))
        try:
            yield
        finally:
            self.events.append(("endgroup", title))

    def info(self, message: str) -> None:
        self.events.append(("info", message))

    def notice(self, title: str, message: str) -> None:
        self.events.append(("notice", f"{title}: {message}"))

    def warning(self, message: str) -> None:
        self.events.append(("warning", message))

    def error(self, message: str) -> None:
        self.events.append(("error", message))

    def command(self, argv: Sequence[str]) -> None:
        self.events.append(("command", shlex.join(argv)))

    def output(self, line: str) -> None:
        self.events.append(("output", line))

    def emit(self, text: str) -> None:
        self.events.append(("emit", text))

    def aside(self, line: str) -> None:
        self.events.append(("aside", line))

    def summary(self, markdown: str) -> None:
        self.events.append(("summary", markdown))

    def of(self, kind: str) -> list[str]:
        return [text for k, text in self.events if k == kind]
