"""Leases: named, renewable claims that order work across replicas (memory/leases/store.py)."""
