"""User-facing errors: the CLI prints these as one line and exits with status 2."""


class LitreproError(Exception):
    """Base class of errors caused by the user's input or environment, not by a bug."""


class UsageError(LitreproError, ValueError):
    """A command-line value is malformed."""


class UnknownMethod(LitreproError, KeyError):
    """A method name that is not registered."""

    def __str__(self) -> str:
        return str(self.args[0])


class RunLocked(LitreproError, RuntimeError):
    """Another ``litrepro run`` holds the output folder."""


class CorpusError(LitreproError, RuntimeError):
    """The corpus is missing, too large or not the expected file."""
