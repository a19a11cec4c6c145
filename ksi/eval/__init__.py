"""Evaluators: what turns a finished workspace into a score."""
