"""Submitted runs (`gym eval submit`): the headless read layer for Slurm jobs and their files."""
