"""What the agent is told: the task's prompt plus a note about ``repo/``.

Loaders keep ``TaskSpec.prompt`` exactly as the task author wrote it; the note
is added here, at the moment a prompt is given to an agent, so hand-built
TaskSpecs and tasks from any source get the same note, and a prompt is never
noted twice.
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

    A task source whose tasks do not use the ``repo/`` contract (Harbor tasks
    work in the image's own directory) sets ``metadata["workspace_note"] =
    False`` and the prompt is given verbatim.
    """
    if task.metadata.get("workspace_note") is False:
        return task.prompt
    prompt = task.prompt.rstrip()
    if prompt.endswith(REPO_NOTE):
        return prompt
    return f"{prompt}\n\n{REPO_NOTE}" if prompt else REPO_NOTE
