"""Skills: SKILL.md packs the agent loads on demand, the store that shares them between
replicas, skill_manage, and `chatgate skills`."""
