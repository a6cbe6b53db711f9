"""Observability: Prometheus metrics and structured, run-stamped logs.

Kept import-light: ``agentops.observability.logging`` is imported from settings, so this
package must not import Django models at import time.
"""
