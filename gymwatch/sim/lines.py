"""Gym 0.4.0's own words, copied from recorded runs (tests/fixtures/gym-0.4.0-*)."""

from __future__ import annotations

import sys
import time

# A cold venv build of a resources server (the recorded mcqa build downloaded these).
DOWNLOADS = [("mlflow-tracing", "1.9MiB"), ("tiktoken", "1.1MiB"), ("cryptography", "4.5MiB"),
             ("fonttools", "5.2MiB"), ("mlflow-skinny", "3.9MiB"), ("ray", "75.6MiB"), ("grpcio", "7.0MiB"),
             ("pygments", "1.2MiB"), ("aiohttp", "1.8MiB"), ("numpy", "15.0MiB"), ("mlflow", "11.5MiB"),
             ("pandas", "11.4MiB"), ("uvloop", "4.3MiB"), ("scipy", "33.7MiB"), ("hf-xet", "4.1MiB"),
             ("pyarrow", "47.8MiB"), ("matplotlib", "9.4MiB"), ("wandb", "19.4MiB"), ("nemo-gym", "30.4MiB"),
             ("pydantic-core", "2.2MiB")]
INSTALLED = ["aiohttp==3.14.5", "anyio==4.16.0", "fastapi==0.165.0", "httpx==0.28.1", "hydra-core==1.3.8",
             "nemo-gym==0.4.0", "numpy==2.5.5", "omegaconf==2.3.1", "openai==2.7.2", "pandas==3.1.1",
             "pydantic==2.14.4", "ray==2.60.0", "requests==2.34.2", "scipy==1.18.1", "starlette==1.10.0",
             "tqdm==4.70.1", "uvicorn==0.54.0", "uvloop==0.23.0"]
PACKAGES = 161
PY = "3.13.0"
PY_BIN = "/root/.pyenv/versions/3.13.0/bin/python3.13"
ULIMIT = ("Found ulimit of %s and failed to automatically increase with error %s. This can cause fd limit "
          "errors like `OSError: [Errno 24] Too many open files`. Consider increasing with ulimit -n 20000 "
          "current limit exceeds maximum limit")
BAR = "#" * 100


def out(text: str = "", stream=None) -> None:
    stream = stream or sys.stdout
    stream.write(text + "\n")
    stream.flush()


def ray_stamp() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{int(t * 1000) % 1000:03d}"


def banner(servers: list[dict]) -> list[str]:
    lines = ["", BAR, "#", "# Server Instances", "#", BAR, ""]
    for i, s in enumerate(servers, 1):
        lines.append(f"[{i}] {s['process_name']} ({s['server_type']}/{s['name']})")
        lines.append("{")
        for key in ("config_path", "dir_path", "entrypoint", "host", "name", "pid", "port", "process_name",
                    "server_type", "url"):
            value = s[key]
            lines.append(f"    '{key}': {value if isinstance(value, int) else repr(value)},")
        lines.append("}")
    lines += [BAR, ""]
    return lines
