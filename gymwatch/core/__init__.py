"""The headless core: parsing, tailing, the run-state model, verdicts, attribution. No Textual here."""
