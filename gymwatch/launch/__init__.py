"""Launching and stopping Gym runs: `gymwatch run`, `gymwatch stop`, `gymwatch demo`."""
