"""Coverage-guided fuzzing (atheris) of the parsers of outside data: ``nox -s fuzz``."""
