"""Lifecycle observers shipped with KSI (report writers)."""
