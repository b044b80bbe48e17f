"""bench.py --latency: fixed request rates with oha (open model, latency
counted from when each request was due), the capacity within a latency
budget, and bench.py compare."""
