"""The OpenAI-compatible API at /v1 as a platform (`api`): a chat completion is a chat turn."""
