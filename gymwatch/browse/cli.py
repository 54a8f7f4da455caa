"""`gymwatch browse [ROOT ...]`: every run under the roots, as a list (TUI, text or JSON)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .. import __version__
from ..errors import UsageError, UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("browse", help="list every run under some directories (a table, text or JSON)",
                       description="Find every Gym run under ROOTs (default: the current directory) and "
                       "list them. Summaries are cached in $XDG_CACHE_HOME/gymwatch (never in a run).")
    p.add_argument("roots", nargs="*", metavar="ROOT", help="directories to search (default: .)")
    p.add_argument("--format", choices=("text", "json"),
                   help="print instead of opening the screen (default when stdout is not a terminal: text)")
    p.add_argument("--no-cache", action="store_true", help="summarise every run afresh, write no cache")
    p.add_argument("--jobs", type=int, default=None,
                   help="processes summarising uncached runs (default: one a core, up to 4; 1: no pool)")
    p.set_defaults(func=_browse)


def _browse(args: argparse.Namespace) -> int:
    from .cache import SummaryCache
    from .fmt import sort_key, text_table
    from .runs import list_runs

    roots = args.roots or ["."]
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"browse: --jobs must be 1 or more (got {args.jobs})")
    bad = [f"{r}: {'not a directory' if os.path.exists(r) else 'no such file or directory'}"
           for r in roots if not os.path.isdir(r)]
    if bad:
        raise UserError(f"browse: {'; '.join(bad)}")
    fmt = args.format or ("tui" if sys.stdout.isatty() and sys.stdin.isatty() else "text")
    if fmt == "tui":
        from .screen import run_browser
        return run_browser(roots, use_cache=not args.no_cache)
    runs = sorted(list_runs(roots, SummaryCache(enabled=not args.no_cache), jobs=args.jobs), key=sort_key)
    if fmt == "json":
        doc = {"gymwatch_version": __version__, "roots": [os.path.abspath(r) for r in roots], "runs": runs}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(text_table(runs, roots))
    return 0
