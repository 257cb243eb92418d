"""Admission: the ordered chain every message passes (access, dedupe, rate, commands, pending
questions) before it is queued for a turn."""
