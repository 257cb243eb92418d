"""One turn of one session: the runner that owns it from claim to commit, the agent loop, the
system prompt, the agent's memory and the tools it is offered."""
