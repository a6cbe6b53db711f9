"""AgentOps: durable execution for long AI-agent runs, and the console to resolve them."""
