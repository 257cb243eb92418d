"""Scheduled reminders and prompts: "when" parsing, job records, delivery, chat commands, CLI.

`gateway/scheduling/scheduler.py` runs the timing; the modules here are the parts it is built from.
"""
