"""Agents: how each coding agent is invoked and how its output is read."""
