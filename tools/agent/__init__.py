"""Tools about the agent's own work: the todo list, clarify questions and delegation to
sub-agents."""
