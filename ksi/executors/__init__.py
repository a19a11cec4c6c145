"""Executors: how attempts are scheduled."""
