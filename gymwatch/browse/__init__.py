"""`gymwatch browse`: find every run under some roots and list them (headless scan, cached summaries, a TUI list)."""
