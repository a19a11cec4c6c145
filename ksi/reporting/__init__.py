"""What a run's records add up to: the summary, the JSON report, what needs attention.

Everything here is derived from ``run.json`` and the journal, never kept only in
memory, so a killed run reports exactly what a finished one would.
"""
