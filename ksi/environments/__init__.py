"""Environments: where agent processes run (local, sandbox, docker)."""
