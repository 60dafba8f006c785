"""Health: what the store holds and how fast it grows, what the journals say about tool calls and jobs, and
the self-test (probes) with its reliability over time."""
