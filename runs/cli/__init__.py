"""Helpers of ``manage.py agentops``: one module per subcommand."""
