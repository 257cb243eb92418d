"""Bundled skills: one folder per skill with a SKILL.md (data, not code; tools/skills/ loads
them)."""
