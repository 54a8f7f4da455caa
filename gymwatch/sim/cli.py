"""The fake `gym` command line: `env start ...` and `eval run [--no-serve] ...`."""

from __future__ import annotations

import sys
from typing import Optional

USAGE = "usage: python -m gymwatch.sim (env start | eval run) [--flag value]... [+key=value]..."
# Gym CLI flags that become Hydra keys (a subset of the real mapping).
FLAGS = {"--resources-server": "resources_server", "--model-type": "model_type", "--agent": "agent_name",
         "--input": "input_jsonl_fpath", "--output": "output_jsonl_fpath", "--num-repeats": "num_repeats",
         "--concurrency": "num_samples_in_parallel", "--limit": "limit"}


class Args:
    def __init__(self, command: str, values: dict, overrides: list[str], no_serve: bool):
        self.command, self.values, self.overrides, self.no_serve = command, values, overrides, no_serve

    def get(self, key: str, default: Optional[str] = None) -> Optional[str]:
        return self.values.get(key, default)

    @property
    def speed(self) -> float:
        try:
            return max(0.001, float(self.values.get("sim_speed", "1")))
        except ValueError:
            return 1.0


def parse(argv: list[str]) -> Args:
    if len(argv) < 2 or tuple(argv[:2]) not in (("env", "start"), ("eval", "run")):
        raise SystemExit(USAGE)
    values: dict[str, str] = {}
    overrides: list[str] = []
    no_serve = False
    rest = argv[2:]
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--no-serve":
            no_serve = True
        elif a.split("=", 1)[0] in FLAGS:
            key = FLAGS[a.split("=", 1)[0]]
            if "=" in a:
                value = a.split("=", 1)[1]
            else:
                i += 1
                value = rest[i] if i < len(rest) else ""
            values[key] = value
            overrides.append(f"+{key}={value}")
        elif "=" in a:
            key, value = a.lstrip("+~").split("=", 1)
            values[key] = value
            overrides.append(a)
        else:
            raise SystemExit(f"gym: unknown argument {a!r}\n{USAGE}")
        i += 1
    return Args(" ".join(argv[:2]), values, overrides, no_serve)


def main(argv: list[str]) -> int:
    args = parse(argv)
    from . import hydra

    hydra.write(args)
    if args.command == "env start":
        from .env import run_env

        return run_env(args)
    from .collect import run_eval

    return run_eval(args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
