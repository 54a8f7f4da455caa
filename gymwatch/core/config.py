"""Names and settings of a run from Hydra's `.hydra/*.yaml`, evaluator metadata and manifests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

from .model import RunInfo
from .redact import redact_argv, redact_obj

_KIND_RE = re.compile(r"(resources_servers|responses_api_models|responses_api_agents)/([\w\-]+)")
_SITE_RE = re.compile(r"^(.*/site-packages)/(?:resources_servers|responses_api_models|responses_api_agents|"
                      r"environment_servers)/")
SPINUP_KEY = "server_spinup_timeout_seconds"
ENDPOINT_KEY = "model_endpoint_readiness_timeout_seconds"


def _load_yaml(path: Path) -> Any:
    try:
        from omegaconf import OmegaConf

        cfg = OmegaConf.load(path)
        return OmegaConf.to_container(cfg, resolve=False)
    except Exception:   # noqa: BLE001 - a broken config must never stop the report
        return None


def read_info(hydra_dirs: list[Path], bundle_meta: Optional[Path], manifest: Optional[dict]) -> RunInfo:
    info = RunInfo()
    for d in hydra_dirs:
        cfg = _load_yaml(d / ".hydra" / "config.yaml")
        if isinstance(cfg, dict):
            _from_config(info, cfg, d.name)
        overrides = _load_yaml(d / ".hydra" / "overrides.yaml")
        if isinstance(overrides, list):
            info.settings.setdefault(f"{d.name}.overrides", redact_argv([str(o) for o in overrides]))
    if bundle_meta is not None and bundle_meta.is_file():
        _from_bundle(info, bundle_meta)
    if manifest:
        _from_manifest(info, manifest)
    return info


def _from_config(info: RunInfo, cfg: dict, label: str) -> None:
    paths = cfg["config_paths"] if isinstance(cfg.get("config_paths"), list) else []
    for path in paths:
        site = _SITE_RE.match(str(path))
        if site and not info.gym_site:
            info.gym_site = site.group(1)
        for kind, name in _KIND_RE.findall(str(path)):
            if kind == "resources_servers":
                info.environment = info.environment or name
            elif kind == "responses_api_models":
                info.settings.setdefault("model_type", name)
    info.agent = info.agent or str(cfg.get("agent_name") or "")
    info.model = info.model or str(cfg.get("policy_model_name") or "")
    info.num_repeats = info.num_repeats or _int(cfg.get("num_repeats"))
    info.concurrency = info.concurrency or _int(cfg.get("num_samples_in_parallel") or cfg.get("concurrency"))
    info.spinup_limit = _first(info.spinup_limit, _seconds(cfg.get(SPINUP_KEY)))
    info.endpoint_limit = _first(info.endpoint_limit, _seconds(cfg.get(ENDPOINT_KEY)))
    flat = {k: v for k, v in cfg.items() if not isinstance(v, (dict, list))}
    info.settings[label] = redact_obj(flat)


def _from_bundle(info: RunInfo, meta_path: Path) -> None:
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return
    target = meta.get("target") if isinstance(meta, dict) else None
    cfg = target.get("config") if isinstance(target, dict) else None
    if not isinstance(cfg, dict):
        return
    info.environment = info.environment or str(cfg.get("resources_server") or "")
    info.agent = info.agent or str(cfg.get("agent") or "")
    info.num_repeats = info.num_repeats or _int(cfg.get("num_repeats"))
    info.concurrency = info.concurrency or _int(cfg.get("concurrency"))
    info.settings["evaluator"] = redact_obj({k: v for k, v in cfg.items() if not isinstance(v, (dict, list))})


def _from_manifest(info: RunInfo, manifest: dict) -> None:
    info.run_id = str(manifest.get("run_id") or "")
    version = str(manifest.get("gym_version") or "")
    info.gym_version = "" if version == "unknown" else version
    created = manifest.get("created")
    info.started_at = float(created) if isinstance(created, (int, float)) else None
    for proc in manifest.get("processes") or []:
        if isinstance(proc, dict) and isinstance(proc.get("argv"), list):
            argv = [str(a) for a in proc["argv"]]
            info.commands.append(" ".join(redact_argv(argv)))
            info.spinup_limit = _first(info.spinup_limit, _seconds(override_value(argv, SPINUP_KEY)))
            info.endpoint_limit = _first(info.endpoint_limit, _seconds(override_value(argv, ENDPOINT_KEY)))


def override_value(argv: list[str], key: str) -> Optional[str]:
    """The value of a Hydra override `key=v`, `+key=v` or `++key=v` on a command line (last wins)."""
    found = None
    for a in argv:
        name, eq, value = a.partition("=")
        if eq and name.lstrip("+") == key and len(name) - len(name.lstrip("+")) <= 2:
            found = value
    return found


def _seconds(value: Any) -> Optional[float]:
    """A number of seconds from a config value (int, float or its text); None when not one."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out == out and out >= 0 else None


def _first(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a if a is not None else b


def _int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
