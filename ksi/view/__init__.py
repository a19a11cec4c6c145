"""Results people can look at: the views behind ``ksi view``, ``ksi show`` and ``ksi compare``.

Everything is read from run directories alone, through the runner's typed
readers; nothing here writes to a run.

* :mod:`ksi.view.runs`: a run as a person reads it (tasks, attempts, bounded
  excerpts of prompts, diffs and logs, the reasons for each status);
* :mod:`ksi.view.verdict`: an attempt's status and why, in words;
* :mod:`ksi.view.diffs`: diff lines classified for highlighting;
* :mod:`ksi.view.excerpt`: bounded, display-safe pieces of files;
* :mod:`ksi.view.generations`: links to generations' notes, and who got which;
* :mod:`ksi.view.compare`: several runs side by side;
* :mod:`ksi.view.chart`: the geometry of the inline SVG chart;
* :mod:`ksi.view.tables`: per-task tables as CSV and Markdown (``ksi report --format``);
* :mod:`ksi.view.html`: the self-contained HTML report (Jinja2, the ``ksi[view]`` extra).
"""
