"""The gateway's web pages: the operator console (/admin) and what the web chat and the
OpenAI-compatible API share with it (sign-in, browser sessions, the stored message log)."""
