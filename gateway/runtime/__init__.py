"""What every part runs on: the HTTP server, metrics and traces, logs, secrets, retry waits, leader
election, background tasks, the event loop and the garbage collector."""
