"""Generation options' allowed values and defaults (no imports: the CLI reads them at start)."""

#: ``--knowledge``: the notes of earlier generations are given to later ones, or not (control arm).
KNOWLEDGE_CHOICES = ("notes", "none")
#: ``--knowledge-eval-output``: failing attempts' eval output tails in the notes, or not.
KNOWLEDGE_EVAL_OUTPUT_CHOICES = ("tail", "none")
#: The default size of the notes one attempt receives (``KNOWLEDGE.md``), in bytes.
DEFAULT_KNOWLEDGE_BUDGET = 16 * 1024
