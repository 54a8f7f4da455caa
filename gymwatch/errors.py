"""The command line's errors and the exit codes that are not verdicts, shared by the CLI and every
subcommand's module (which the CLI registers, so they cannot import it)."""

from __future__ import annotations

# Not verdicts: a script must tell a mistyped command from a run that failed (sysexits.h's codes).
EXIT_USAGE = 64       # EX_USAGE: the command line is wrong (argparse's own 2 is a verdict here)
EXIT_INTERNAL = 70    # EX_SOFTWARE: gymwatch itself failed (a bug: --debug shows the traceback)
# A signal's, as a shell reports it (128 + its number)
EXIT_INTERRUPTED = 130    # SIGINT: Ctrl-C
EXIT_BROKEN_PIPE = 141    # SIGPIPE: the reader of the output went away (`gymwatch report RUN | head`)


class UserError(Exception):
    """A problem the user can fix: printed as one line, never a traceback."""


class UsageError(UserError):
    """The command line itself is wrong (a value out of range, a missing gym command): exit 64."""
