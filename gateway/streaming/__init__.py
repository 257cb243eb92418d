"""Replies shown while the model writes them: see reply.py (ReplyStream) and protocol.py."""
