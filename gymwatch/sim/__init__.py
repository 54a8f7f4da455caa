"""A simulated NeMo Gym 0.4.0 for `gymwatch demo` and tests: `python -m gymwatch.sim env start ...`
/ `eval run ...` behave like the `gym` CLI (same stdout/stderr lines, server prefixes, readiness
lines, rollouts files and sidecars), with a slow venv install, a failed trial and two never-ran
trials. Everything runs on loopback; no model is called. Speed: `+sim_speed=F` (1.0 = realistic).
Gym's `+nemo_gym_log_dir` (each server's log, and the 0.4.0 pipefail bug that comes with it on a
wheel install) and `+skip_venv_if_present` act as in Gym."""
