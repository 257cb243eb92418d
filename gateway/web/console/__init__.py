"""The operator console at /admin: sign-in, live pages, approvals, jobs and conversations."""
