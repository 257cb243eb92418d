"""Human approval of tool calls: the service, its records and standing grants, the seals that
keep the store from deciding, the cross-replica rendezvous and the outside-content gate."""
