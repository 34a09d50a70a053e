"""The one exception hierarchy of dswheels.

Every failure a user can meet is a subclass of :class:`DswheelsError` with its own exit
code, so scripts and workflows can tell a bad matrix (2) from a failed compile (5).
Only :func:`dswheels.cli.main` catches them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = [
    "BuildError",
    "ConfigError",
    "DswheelsError",
    "EnvironmentMismatchError",
    "GitHubAPIError",
    "GitHubError",
    "NothingToDoError",
    "ProvenanceDigestError",
    "ProvenanceError",
    "ProvenanceIdentityError",
    "ProvenanceSubjectError",
    "PublishError",
    "SmokeError",
    "SourceError",
    "VerifyError",
]


class DswheelsError(Exception):
    """Base class: an error the user can act on. Exit code 1 is reserved for it and for bugs.

    Its hint is given when it is made and never changes after it is raised: a caller that knows more
    (the build log's path) raises :meth:`with_hint`'s copy in its place.
    """

    exit_code: ClassVar[int] = 1
    title: ClassVar[str] = "error"

    def __init__(self, message: str, *, hint: str | None = None, details: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self._hint = hint
        self.details = details

    @property
    def hint(self) -> str | None:
        """What to do about it."""
        return self._hint

    def with_hint(self, note: str) -> Self:
        """A copy of this error (its type, message, details and every attribute) whose hint ends with ``note``.

        >>> error = ConfigError("bad", hint="fix it")
        >>> error.with_hint("full log: x.log").hint, error.hint
        ('fix it; full log: x.log', 'fix it')
        """
        copied = type(self).__new__(type(self), *self.args)  # not __init__: a subclass may take other arguments
        copied.__dict__.update(self.__dict__)
        copied._hint = f"{self._hint}; {note}" if self._hint else note  # noqa: SLF001 - a copy of this class
        return copied

    def render(self) -> str:
        """The text the CLI prints: what happened, then supporting details, then what to do."""
        lines = [f"{self.title}: {self.message}"]
        if self.details:
            lines.extend(f"  {line}" for line in self.details.rstrip("\n").splitlines())
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class ConfigError(DswheelsError):
    """Bad input: matrix file, command-line combination, or a combination the rules forbid."""

    exit_code = 2
    title = "bad input"


class NothingToDoError(DswheelsError):
    """The selection is valid but leaves nothing to do (e.g. everything is already published)."""

    exit_code = 3
    title = "nothing to do"


class SourceError(DswheelsError):
    """Fetching or checking a DeepSpeed source failed (network, sha256 mismatch, bad archive)."""

    exit_code = 4
    title = "source error"


class BuildError(DswheelsError):
    """A wheel build failed: the compiler, a missing op, a toolchain mismatch."""

    exit_code = 5
    title = "build failed"


class VerifyError(DswheelsError):
    """A built wheel failed its static or runtime checks."""

    exit_code = 6
    title = "verify failed"


class PublishError(DswheelsError):
    """Writing the index or uploading wheels failed."""

    exit_code = 7
    title = "publish failed"


class SmokeError(DswheelsError):
    """Training with the installed wheel failed or misbehaved."""

    exit_code = 8
    title = "smoke test failed"


class EnvironmentMismatchError(DswheelsError):
    """The user's environment cannot do what was asked (no wheel fits, toolchain missing)."""

    exit_code = 9
    title = "environment problem"


class GitHubError(DswheelsError):
    """GitHub's API failed: no answer, an error answer, or one that is not what the API sends.

    A command that publishes says so as its own error (``publish``, ``index --github``: 7, through
    :func:`dswheels.host.github.failing_as`); the follow commands (``dswheels facts dispatch``,
    ``facts issue``) fail with this one."""

    exit_code = 10
    title = "GitHub failed"


class GitHubAPIError(GitHubError):
    """GitHub answered with an error; ``status`` and the parsed body are kept for callers."""

    def __init__(self, message: str, *, status: int, body: dict[str, Any], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.body = body

    def has_error_code(self, code: str) -> bool:
        errors = self.body.get("errors")
        return isinstance(errors, list) and any(isinstance(e, dict) and e.get("code") == code for e in errors)

    @property
    def github_message(self) -> str:
        message = self.body.get("message")
        return message if isinstance(message, str) else ""


class ProvenanceError(DswheelsError):
    """A wheel's provenance (PEP 740) is missing, malformed, or its signature does not verify against the
    trusted root; nothing was installed. The three ways a valid signature still does not vouch for the wheel
    have their own codes (12, 13, 14), so a script can tell a tampered wheel from a misplaced attestation."""

    exit_code = 11
    title = "provenance refused"


class ProvenanceDigestError(ProvenanceError):
    """The attestation names this wheel, but other bytes: the wheel is not the one that was attested."""

    exit_code = 12


class ProvenanceSubjectError(ProvenanceError):
    """The attestation is valid, but for another file than this wheel."""

    exit_code = 13


class ProvenanceIdentityError(ProvenanceError):
    """The attestation is signed, but by another identity than the repository's release workflow."""

    exit_code = 14
