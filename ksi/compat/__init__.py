"""The original KSI's public API, converted at the boundary.

Code written against the original KSI builds tasks as ``TaskSpec(id, repo,
prompt, metadata={"repo_path": ..., "eval_command": ...})``, loads them with
``load_tasks_for_source``/``load_custom_tasks`` and grades with
``CommandEvaluator().evaluate()``, which returns a dict with the original's
status words. Those names stay where the original had them; what they mean
in KSI's terms is decided here, in two modules:

* :mod:`ksi.compat.task_keys`: the original's metadata keys and the typed
  part each fills, read once, when a ``TaskSpec`` is built without that part.
  It sits below :mod:`ksi.models` (``TaskSpec`` reads through it);
* :mod:`ksi.compat.original`: KSI's values in the original's shape: the
  loaders' tasks (starting files on disk, the original's keys in
  ``metadata``, the note in the prompt) and ``evaluate()``'s dict. It sits
  above :mod:`ksi.models` (it names tasks, results and the agent's prompt).

One module could not be both below and above ``TaskSpec`` without an import
circle, hence two; this package imports neither, so importing one does not
import the other.
"""
