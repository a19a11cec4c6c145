"""What the agent is told: the task's prompt plus a note about ``repo/``.

Task sources keep ``TaskSpec.prompt`` as the author wrote it; the note is
added here, when a prompt is given to an agent, so hand-built TaskSpecs and
tasks from any source get the same note. The original KSI's loaders
(``load_tasks_for_source``, ``load_custom_tasks``) return prompts that
already end with it, as the original did: :func:`agent_prompt` sees the note
and never adds it twice.
"""

from __future__ import annotations

from ksi.models import TaskSpec

REPO_NOTE = (
    "Note: the directory `repo/` in your current working directory holds this task's "
    "starting files (it may be empty). Create or edit files there; that directory is "
    "what will be graded."
)


def agent_prompt(task: TaskSpec) -> str:
    """The prompt given to the agent: ``task.prompt``, a blank line, and :data:`REPO_NOTE`.

    A task whose work is not in ``repo/`` (Harbor tasks work in the image's
    own directory) has ``workspace_note=False`` and its prompt is given
    verbatim.
    """
    if not task.workspace_note:
        return task.prompt
    prompt = task.prompt.rstrip()
    if prompt.endswith(REPO_NOTE):
        return prompt
    return f"{prompt}\n\n{REPO_NOTE}" if prompt else REPO_NOTE
