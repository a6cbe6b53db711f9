"""Demo agents and a sandbox outside world."""
