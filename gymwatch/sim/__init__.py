"""A simulated NeMo Gym 0.4.0 for `gymwatch demo` and tests: `python -m gymwatch.sim env start ...`
/ `eval run ...` behave like the `gym` CLI (same stdout/stderr lines, server prefixes, readiness
lines, rollouts files and sidecars), with a slow venv install, a failed trial and two never-ran
trials. Everything runs on loopback; no model is called. Speed: `+sim_speed=F` (1.0 = realistic)."""
