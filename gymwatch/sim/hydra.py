"""What Hydra leaves in `hydra.run.dir` for each gym call: `.hydra/{config,overrides}.yaml`."""

from __future__ import annotations

import json
import os
from pathlib import Path

SITE = "/opt/sim-gym/site-packages"   # where a real install would keep the server dirs


def _yaml_scalar(v: str) -> str:
    return v if v.replace(".", "").replace("_", "").replace("-", "").replace("/", "").replace(":", "").isalnum() \
        else json.dumps(v)


def write(args) -> None:
    run_dir = args.get("hydra.run.dir") or os.path.join("outputs", "sim")
    d = Path(run_dir) / ".hydra"
    d.mkdir(parents=True, exist_ok=True)
    lines = []
    if args.command == "env start" or not args.no_serve:
        res = args.get("resources_server", "mcqa")
        model = args.get("model_type", "openai_model")
        lines += ["config_paths:", f"- {SITE}/resources_servers/{res}/configs/{res}.yaml",
                  f"- {SITE}/responses_api_models/{model}/configs/{model}.yaml"]
    for k, v in args.values.items():
        if k in ("hydra.run.dir", "resources_server", "model_type"):
            continue
        lines.append(f"{k}: {_yaml_scalar(v)}")
    (d / "config.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    kept = [o for o in args.overrides if not o.lstrip("+").startswith("hydra.")]
    (d / "overrides.yaml").write_text("".join(f"- {_yaml_scalar(o)}\n" for o in kept), encoding="utf-8")
