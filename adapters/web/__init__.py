"""The web chat: people talk to the agent in a browser at /chat (platform `web`)."""
