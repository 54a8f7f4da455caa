"""Names and settings of a run from Hydra's `.hydra/*.yaml`, evaluator metadata and manifests."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Optional

from .model import RunInfo
from .redact import redact_argv, redact_obj
from .tail import read_head

_KIND_RE = re.compile(r"(resources_servers|responses_api_models|responses_api_agents)/([\w\-]+)")
_SITE_RE = re.compile(r"^(.*/site-packages)/(?:resources_servers|responses_api_models|responses_api_agents|"
                      r"environment_servers)/")
SPINUP_KEY = "server_spinup_timeout_seconds"
ENDPOINT_KEY = "model_endpoint_readiness_timeout_seconds"


def _load_yaml(path: Path) -> Any:
    plain = _load_plain_yaml(path)
    if plain is not _UNSURE:
        return plain
    try:
        from omegaconf import OmegaConf

        cfg = OmegaConf.load(path)
        return OmegaConf.to_container(cfg, resolve=False)
    except Exception:   # noqa: BLE001 - a broken config must never stop the report
        return None


_UNSURE = object()
# What OmegaConf.load would make differently from a plain YAML load, in the text: anchors, aliases,
# merge keys, tags, interpolations, missing values (`???`). Hydra writes none of them in the
# configs read here (config.yaml, overrides.yaml): a config with any is read by OmegaConf.
_OMEGA_SIGNS = ("&", "*", "<<", "!", "${", "???")
# OmegaConf's loader (omegaconf/_yaml.py): floats without a dot (`1e3`) and no timestamps.
_OMEGA_FLOAT = re.compile(r"""^(?:
     [-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)
_loader: Any = None


def _plain_loader() -> Any:
    """PyYAML's C loader resolving scalars as OmegaConf's loader does; a duplicate key fails."""
    global _loader
    if _loader is None:
        import yaml

        class Loader(yaml.CSafeLoader):
            def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                out = super().construct_mapping(node, deep=deep)
                if len(out) != len(node.value):
                    raise ValueError("duplicate key")
                return out

        Loader.add_implicit_resolver("tag:yaml.org,2002:float", _OMEGA_FLOAT, list("-+0123456789."))
        Loader.yaml_implicit_resolvers = {k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
                                          for k, v in Loader.yaml_implicit_resolvers.items()}
        _loader = Loader
    return _loader


def _load_plain_yaml(path: Path) -> Any:
    """`OmegaConf.to_container(OmegaConf.load(path), resolve=False)` of a config with nothing
    OmegaConf treats specially: the same containers from a plain YAML load, without importing
    OmegaConf (a large share of a report's start). _UNSURE: anything else (read by OmegaConf)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return _UNSURE
    if any(sign in text for sign in _OMEGA_SIGNS):
        return _UNSURE
    try:
        import yaml

        obj = yaml.load(text, Loader=_plain_loader())
    except Exception:   # noqa: BLE001 - OmegaConf decides what a broken file gives
        return _UNSURE
    return obj if isinstance(obj, (dict, list)) and _plain(obj) else _UNSURE


def _plain(obj: Any) -> bool:
    """Only str keys, and str, int, float, bool, None, lists and dicts of them."""
    if isinstance(obj, dict):
        return all(type(k) is str and _plain(v) for k, v in obj.items())
    if isinstance(obj, list):
        return all(_plain(v) for v in obj)
    return obj is None or type(obj) in (str, int, float, bool)


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


_AGENT_RE = re.compile(r"^agent_name:\s*['\"]?([^'\"\s#]+)", re.M)
_MODEL_RE = re.compile(r"^policy_model_name:\s*['\"]?([^'\"\s#]+)", re.M)


def read_names(hydra_dirs: list[Path], bundle_meta: Optional[Path], manifest: Optional[dict]) -> RunInfo:
    """`read_info`'s names (environment, agent, model) from a line scan of each Hydra dir's
    `config.yaml`, no YAML parser (that alone cost more than the rest of a small run's summary),
    and what a bundle's metadata and a manifest say; no settings."""
    info = RunInfo()
    for d in hydra_dirs:
        try:
            text = read_head(os.path.join(d, ".hydra", "config.yaml"), 1 << 20).decode("utf-8", "replace")
        except OSError:
            text = ""
        for kind, name in _KIND_RE.findall(text):
            if kind == "resources_servers":
                info.environment = info.environment or name
        info.agent = info.agent or _first_group(_AGENT_RE, text)
        info.model = info.model or _first_group(_MODEL_RE, text)
    if bundle_meta is not None and bundle_meta.is_file():
        _from_bundle(info, bundle_meta)
    if manifest:
        _from_manifest(info, manifest)
    return info


def _first_group(pattern: re.Pattern, text: str) -> str:
    m = pattern.search(text)
    return m.group(1) if m else ""


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
        meta = json.loads(read_head(meta_path).decode("utf-8"))
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
