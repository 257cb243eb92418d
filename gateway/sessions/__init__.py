"""Conversations: session keys, the queue and claimer that run one turn at a time per session,
leases, history and its compaction, the turn log and retention."""
