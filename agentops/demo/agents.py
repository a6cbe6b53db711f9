"""Demo agents (filled in by the demo work)."""
