"""The serving runtime: settings, the engine table, the edge in front of
every framework, worker processes, child processes, and the local
databases (databases/)."""
