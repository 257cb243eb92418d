"""Bundled skills: one folder per skill with a SKILL.md (data, not code; see tools/skills.py)."""
