"""The user's keymap file: binding id = "keys", applied with `App.set_keymap`.

Where: $GYMWATCH_KEYMAP, else $XDG_CONFIG_HOME/gymwatch/keymap.toml (~/.config when unset).
Example:

    "gymwatch.maximize" = "Z"          # quoted: a bare dotted key is a TOML table
    [trials]
    filter = "F,ctrl+f"                # the same as "trials.filter"

Whatever is wrong in it (bad TOML, an unknown id, a key Textual cannot name) is a one-line
problem naming the file; the good entries still apply. Nothing here may raise into the app.
The app applies it as it starts (`GymwatchApp.load_keymap()`), over every binding of the live
screen (`all_bindings()`, which the help lists too: the app's, its `main` screen's, the panes').
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Iterable, Optional

from textual.binding import Binding, BindingsMap
from textual.keys import Keys, key_to_character

from .board import ReadinessBoard
from .card import TrialCard
from .logview import LogView
from .trials import TrialsTable

MODIFIERS = {"ctrl", "shift", "alt", "meta", "super", "hyper"}
# Ids a binding had before the ids took one style (words joined by `-`): a keymap file naming
# one still moves that binding.
ALIASES = {"gymwatch.next_failure": "gymwatch.next-failure", "gymwatch.prev_failure": "gymwatch.prev-failure",
           "gymwatch.all_logs": "gymwatch.all-logs", "gymwatch.next_cause": "gymwatch.next-cause",
           "gymwatch.prev_cause": "gymwatch.prev-cause"}
KNOWN_KEYS = {k.value for k in Keys}
CARD = "Trial card (enter on a trial)"


def path() -> Path:
    explicit = os.environ.get("GYMWATCH_KEYMAP")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "gymwatch" / "keymap.toml"


def load(known: Iterable[str], where: Optional[Path] = None) -> tuple[Path, dict[str, str], list[str]]:
    """(the file, {binding id: keys} of its good entries, one line per problem). No file: nothing."""
    p = where or path()
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return p, {}, []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        return p, {}, [f"keymap {p}: {one_line(e)}; not used"]
    return p, *check(flatten(raw), set(known), p)


def current_ids(mapping: dict[str, str]) -> dict[str, str]:
    """A keymap with each old id (ALIASES) as the id its binding has now."""
    return {ALIASES.get(bid, bid): keys for bid, keys in mapping.items()}


def flatten(table: dict, prefix: str = "") -> dict[str, object]:
    """`[trials] filter = "F"` and `"trials.filter" = "F"` both as {"trials.filter": "F"}."""
    out: dict[str, object] = {}
    for k, v in table.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, name + "."))
        else:
            out[name] = v
    return out


def check(entries: dict[str, object], known: set[str], p: Path) -> tuple[dict[str, str], list[str]]:
    good: dict[str, str] = {}
    problems: list[str] = []
    for bid, keys in entries.items():
        why = problem(ALIASES.get(bid, bid), keys, known)
        if why:
            problems.append(f"keymap {p}: {bid}: {why}; ignored")
        else:
            good[ALIASES.get(bid, bid)] = ",".join(k.strip() for k in str(keys).split(","))
    return good, problems


def problem(bid: str, keys: object, known: set[str]) -> str:
    if bid not in known:
        return "no such binding (? lists the ids)"
    if not isinstance(keys, str) or not keys.strip():
        return 'keys must be a string such as "z" or "ctrl+z,f2"'
    bad = [k.strip() for k in keys.split(",") if not valid_key(k.strip())]
    return f"unknown key {bad[0]!r}" if bad else ""


def valid_key(key: str) -> bool:
    """A key Textual can name: a character, or a key name, after any modifiers."""
    *mods, name = key.split("+")
    if not name or any(m not in MODIFIERS for m in mods):
        return False
    return len(name) == 1 or name in KNOWN_KEYS or key_to_character(name) is not None


def one_line(e: Exception) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__


def all_bindings(app) -> list[tuple[str, Binding]]:
    """(section, Binding) of every binding on the live screen, the keymap applied: the main
    screen's and the app's (in the order a key is looked up: the screen's ctrl+c comes before the
    app's), then each pane's, then the trial card's. The panes' are their classes' (the same on
    every instance), so the keymap can be checked before the panes are mounted. The help screen
    lists these; the keymap file checks ids here."""
    from .screen import MainScreen  # (here: the screen imports this module)
    from .subscreen import BenchmarksTable

    main = getattr(app, "main", None)
    nodes = [("Everywhere", main._bindings if main is not None else MainScreen._merged_bindings),
             ("Everywhere", app._bindings),
             ("Servers", ReadinessBoard._merged_bindings), ("Trials", TrialsTable._merged_bindings),
             ("Log", LogView._merged_bindings), (CARD, BindingsMap(TrialCard.BINDINGS))]
    if getattr(app, "sub_screen", None) is not None:
        nodes.insert(0, ("Submission", BenchmarksTable._merged_bindings))
    out: list[tuple[str, Binding]] = []
    for section, found in nodes:
        if found is None:
            continue
        bindings = found.copy()
        if app._keymap:
            bindings.apply_keymap(app._keymap)
        for _key, group in bindings.key_to_bindings.items():
            out.extend((section, b) for b in group)
    return out


def key_shown(app, bid: str, default: str) -> str:
    """How the footer and the help show the key of binding `bid` now (the keymap applied)."""
    found = next((b for _, b in all_bindings(app) if b.id == bid), None)
    return app.get_key_display(found) if found is not None else default
