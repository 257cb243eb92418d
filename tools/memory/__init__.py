"""Memory tools: durable notes about the chat and person, and search over past conversations."""
