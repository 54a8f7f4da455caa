"""Exit codes a script can rely on: a wrong command line is never mistaken for a failed run."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gymwatch.cli import _load_extras, build_parser, main
from gymwatch.core.verdict import EXIT_INPUT, EXIT_OK, EXIT_RUN, EXIT_TRIALS
from gymwatch.errors import EXIT_INTERNAL, EXIT_USAGE

README = Path(__file__).resolve().parent.parent / "README.md"
VERDICT_CODES = {EXIT_OK, EXIT_TRIALS, EXIT_RUN, EXIT_INPUT}


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gymwatch", *map(str, args)], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, cwd=cwd)


def subcommands() -> list[str]:
    _load_extras()
    return sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def test_the_usage_code_is_no_verdicts():
    assert EXIT_USAGE not in VERDICT_CODES and EXIT_INTERNAL not in VERDICT_CODES | {EXIT_USAGE}


@pytest.mark.parametrize("command", subcommands())
def test_an_unknown_option_is_a_usage_error_for_every_subcommand(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--no-such-option"])
    assert exc.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "usage: gymwatch" in err and "error:" in err


@pytest.mark.parametrize("args", [["report"], ["diff", "a"], ["--no-such-option"], ["report", ".", "--format", "xml"]])
def test_a_missing_argument_or_a_bad_choice_exits_64_in_a_subprocess(args):
    proc = cli(*args)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_mistyped_command_is_a_usage_error_not_an_unreadable_run(tmp_path):
    proc = cli("reprot", cwd=tmp_path)
    assert proc.returncode == EXIT_USAGE
    assert "did you mean 'report'" in proc.stderr
    # a path spelled like a command is still a path
    (tmp_path / "reprot").mkdir()
    proc = cli("report", tmp_path / "reprot")
    assert proc.returncode == EXIT_INPUT and "not a Gym run" in proc.stderr


def test_values_out_of_range_are_usage_errors(tmp_path):
    assert cli("replay", tmp_path, tmp_path / "dst", "--speed", "0").returncode == EXIT_USAGE
    assert cli("browse", tmp_path, "--jobs", "0").returncode == EXIT_USAGE
    proc = cli("run", "--no-tui", "--", "env", "stop")
    assert proc.returncode == EXIT_USAGE and "env stop" in proc.stderr


def test_a_missing_path_says_no_such_file_and_a_file_says_not_a_directory(tmp_path):
    missing = tmp_path / "nope"
    for args in (["browse", missing], ["replay", missing, tmp_path / "dst"]):
        proc = cli(*args)
        assert proc.returncode == EXIT_INPUT
        assert f"{missing}: no such file or directory" in proc.stderr and "not a directory" not in proc.stderr
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    for args in (["browse", afile], ["replay", afile, tmp_path / "dst2"]):
        proc = cli(*args)
        assert proc.returncode == EXIT_INPUT and f"{afile}: not a directory" in proc.stderr


def test_an_internal_error_has_its_own_code(monkeypatch, capsys):
    import gymwatch.core.session as session

    def broken(*a, **kw):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(session, "read_run", broken)
    assert main(["report", "."]) == EXIT_INTERNAL
    assert "internal error: ZeroDivisionError: boom" in capsys.readouterr().err


def test_readme_lists_every_exit_code():
    text = README.read_text(encoding="utf-8")
    table = text[text.index("### Exit codes"):]
    table = table[: table.index("\n\n", table.index("| code |"))]
    codes = {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert codes == VERDICT_CODES | {EXIT_USAGE, EXIT_INTERNAL, 130, 141}
    assert "diff" in table and "stop" in table
