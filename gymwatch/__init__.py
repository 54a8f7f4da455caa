"""gymwatch: a terminal dashboard for NVIDIA NeMo Gym runs."""

__version__ = "0.1.0"
