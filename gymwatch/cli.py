"""The `gymwatch` command line. Subcommands register themselves in COMMANDS."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

from . import __version__
from .core.layout import NotARun
from .core.verdict import EXIT_INPUT
from .errors import EXIT_BROKEN_PIPE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, UsageError, UserError

EPILOG = f"""exit codes: 0 ok or still running; 1 some trials failed / never ran / missing (diff: some
trial got worse); 2 no agent ran, startup failed or collection aborted; 3 unreadable input or not a
run; {EXIT_USAGE} usage error (a wrong command line); {EXIT_INTERNAL} internal error; {EXIT_INTERRUPTED} interrupted (Ctrl-C)."""


class Parser(argparse.ArgumentParser):
    """argparse, exiting EXIT_USAGE on a bad command line: its own 2 is the exit code of a failed
    run. Subcommands' parsers are made of the same class (add_subparsers uses the parent's)."""

    def error(self, message: str):   # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _no_slurm(args: argparse.Namespace) -> None:
    """`--no-slurm`: this process and the screens it starts read submitted runs from files alone."""
    if getattr(args, "no_slurm", False):
        from .core.slurmfeed import files_alone

        files_alone()


def _report(args: argparse.Namespace) -> int:
    from .core import fast
    from .core.session import read_run
    from .core.target import IsSubmission
    from .core.verdict import verdict
    from .report import malformed_summary, render, unreadable_lines, write_json

    _no_slurm(args)
    try:
        with fast.bulk_load(keep=True):       # the model lives until the process ends
            session = read_run(args.path, args.logs, check_processes=not args.no_process_check, helpers=True,
                               ray=args.ray)
    except IsSubmission as exc:
        return _report_submission(args, exc.submission)
    _ray_error(session.state)
    written, said = _retry_input(session, args.retry_input) if args.retry_input else (None, "")
    if args.format in ("json", "junit"):
        v = verdict(session.state)
        code = v.exit_code
        if args.format == "json":
            write_json(session.state, v, sys.stdout, written.to_json() if written else None)
        else:
            from .junit import iter_junit

            for piece in iter_junit(session.state, v):
                sys.stdout.write(piece)
    else:
        text, code = render(session.state, args.format)
        sys.stdout.write(text)
    if said:
        print(said, file=sys.stdout if args.format in ("text", "md") and written else sys.stderr)
    for line in unreadable_lines(session.state):
        print(f"gymwatch: {line}", file=sys.stderr)
    warning = malformed_summary(session.state)
    if warning:
        print(f"gymwatch: {warning}", file=sys.stderr)
    return code


def _report_submission(args: argparse.Namespace, sub) -> int:
    """The report of a submission of several benchmarks: the whole, then each benchmark."""
    from .core import fast
    from .core.jobsession import read_submission
    from .core.verdict import verdict
    from .report import iter_submission_json, malformed_summary, render_submission, unreadable_lines

    if args.retry_input:
        raise UsageError(f"{args.path} is a submission of {len(sub.benchmarks)} benchmarks: --retry-input "
                         f"takes one benchmark's job dir (e.g. {Path(str(sub.root or args.path)) / sub.benchmarks[0].name})")
    with fast.bulk_load(keep=True):
        ss = read_submission(sub, helpers=True, ray=args.ray)
    benchmarks = [(name, s.state, verdict(s.state)) for name, s in ss.sessions.items()]
    _ray_error(benchmarks[0][1])
    if args.format == "json":
        from .report import whole

        code = whole(benchmarks)[1].exit_code
        pieces = iter_submission_json(sub, benchmarks)
        for piece in pieces:
            sys.stdout.write(piece)
    elif args.format == "junit":
        from .junit import iter_junit_suites
        from .report import whole

        code = whole(benchmarks)[1].exit_code
        for piece in iter_junit_suites(benchmarks):
            sys.stdout.write(piece)
    else:
        text, code = render_submission(sub, benchmarks, args.format)
        sys.stdout.write(text)
    for name, state, _ in benchmarks:
        for line in unreadable_lines(state):
            print(f"gymwatch: {name}: {line}", file=sys.stderr)
        warning = malformed_summary(state)
        if warning:
            print(f"gymwatch: {name}: {warning}", file=sys.stderr)
    return code


def _ray_url(text: str) -> str:
    from .core.cluster.ray import url_option

    return url_option(text)


def _ray_error(state) -> None:
    """`--ray`: why the dashboard could not be read, on stderr too (the report says it in its Ray part)."""
    if state.ray is not None and state.ray.error:
        print(f"gymwatch: {state.ray.error}", file=sys.stderr)


def _retry_input(session, file: str) -> tuple:
    """(RetryInput or None, what to tell the user): the retry file written before the report is
    printed, so the JSON report can say what it holds. A refusal is a UserError: nothing printed."""
    from .core import rerun
    from .retry import RetryRefused, nothing_to_rerun, write

    plan = rerun.plan(session.state)
    try:
        written = write(session.state, session.layout, plan, file)
    except RetryRefused as exc:
        raise (UsageError if exc.usage else UserError)(str(exc)) from None
    if written is None:
        return None, f"gymwatch: {nothing_to_rerun(plan, file)}"
    return written, "\n".join(["", *written.text()])


def _attach(args: argparse.Namespace) -> int:
    from .core.layout import MANIFEST_NAME
    from .tui.app import run_app

    _no_slurm(args)
    code = run_app(args)
    if (Path(args.path) / MANIFEST_NAME).is_file():   # a run gymwatch launched: it can stop it
        from .launch.runner import ask_on_quit

        ask_on_quit(Path(args.path), args.on_quit)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gymwatch", description="Watch, triage and report NVIDIA NeMo Gym runs.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gymwatch {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    rep = sub.add_parser("report", help="print the verdict, servers and trials of a run (no screen)",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    rep.add_argument("path", help="a run dir, a rollouts .jsonl, an evaluator bundle, a gymwatch run dir, or a "
                                  "submission (gym eval submit: its dir, one benchmark's job dir, its record, "
                                  "its gym job id)")
    rep.add_argument("--format", choices=("text", "json", "md", "junit"), default="text",
                     help="junit: one testcase per trial, for CI test reports")
    rep.add_argument("--logs", help="per-server log dir (+nemo_gym_log_dir) when not <run>/logs")
    rep.add_argument("--no-process-check", action="store_true",
                     help="do not look for live gym processes (treat the run as ended)")
    rep.add_argument("--no-slurm", action="store_true",
                     help="a submission: do not ask Slurm about its jobs, read their states from their files "
                          "alone (also GYMWATCH_NO_SLURM=1)")
    rep.add_argument("--ray", metavar="URL", type=_ray_url,
                     help="the Ray dashboard of a run whose services span nodes (e.g. http://HEAD:8265): its nodes "
                          "(alive or dead), actors and placement groups are added to the report (text, md, json), "
                          "and the servers on a dead node, or whose Ray actor died, are marked failed")
    rep.add_argument("--retry-input", metavar="FILE",
                     help="write the input rows of every trial a rerun can fix (failed, never ran, missing) "
                          "to FILE, a new file outside the run, for `gym eval run --input FILE`, and print "
                          "the command that collects them")
    rep.set_defaults(func=_report)

    att = sub.add_parser("attach", help="open the live screen on a run (also: gymwatch PATH)")
    att.add_argument("path", help="a run, or a submission (its dir, record or gym job id: several benchmarks open "
                     "the submission's screen, one opens its run), or one benchmark's job dir")
    att.add_argument("--no-slurm", action="store_true",
                     help="a submission: do not ask Slurm about its jobs, read their states from their files alone")
    att.add_argument("--logs", help="per-server log dir when not <run>/logs")
    att.add_argument("--poll", action="store_true", help="poll files instead of inotify (network filesystems)")
    att.add_argument("--head", help="Gym head server URL to probe, e.g. http://127.0.0.1:11000")
    att.add_argument("--no-notify", action="store_true",
                     help="no bell or desktop notification when the run changes stage (servers ready, "
                          "startup failed, first never-ran trial, collection aborted, finished)")
    att.add_argument("--on-quit", choices=("ask", "stop", "leave"), default="ask",
                     help="for a run gymwatch launched and still running: what closing the screen does "
                          "(default: ask; other runs are never touched)")
    att.add_argument("--ray", metavar="URL", type=_ray_url,
                     help="the Ray dashboard of a run whose services span nodes (e.g. http://HEAD:8265): asked "
                          "every 10 s; the summary says its nodes (how many dead), and the servers on a dead "
                          "node, or whose Ray actor died, are marked failed")
    att.set_defaults(func=_attach)

    for register in EXTRA_COMMANDS:
        register(sub)
    return parser


# Other modules (launcher, demo, replay, browse) add their subcommands here.
EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def _load_extras() -> None:
    import importlib

    for mod in ("gymwatch.launch.cli", "gymwatch.replay", "gymwatch.browse.cli", "gymwatch.serve",
                "gymwatch.diff"):
        m = importlib.import_module(mod)
        if m.register not in EXTRA_COMMANDS:
            EXTRA_COMMANDS.append(m.register)


def _not_a_command(parser: argparse.ArgumentParser, word: str, known: set[str]) -> None:
    """`gymwatch WORD` means attach WORD; but a WORD that is no path and is spelled like a command
    is a mistyped command (a usage error), not a run that cannot be read."""
    import difflib

    if os.path.lexists(word):
        return
    close = difflib.get_close_matches(word, sorted(k for k in known if not k.startswith("-")), n=1, cutoff=0.75)
    if close:
        parser.error(f"unknown command {word!r} (did you mean {close[0]!r}?); "
                     f"`gymwatch PATH` opens the run at PATH, and {word!r} is no such file or directory")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if [a for a in argv if a != "--debug"][:1] != ["report"]:   # the report needs none of them (their
        _load_extras()                                          # imports: tempfile, socket, ...)
    parser = build_parser()
    known = {"report", "attach", "-h", "--help", "--version", "--debug"} | set(
        parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    if argv and argv[0] not in known and not argv[0].startswith("-"):
        _not_a_command(parser, argv[0], known)
        argv.insert(0, "attach")   # `gymwatch PATH` means attach
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"gymwatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (NotARun, UserError) as exc:
        print(f"gymwatch: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`gymwatch report RUN | head`): stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 - one line for users, the traceback with --debug
        if args.debug or os.environ.get("GYMWATCH_DEBUG"):
            raise
        print(f"gymwatch: internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)",
              file=sys.stderr)
        return EXIT_INTERNAL
