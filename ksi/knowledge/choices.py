"""Generation options' defaults (no imports: the CLI reads them at start).

Their allowed words are :class:`ksi.choices.KnowledgeMode` and
:class:`ksi.choices.KnowledgeEvalOutput`.
"""

#: The default size of the notes one attempt receives (``KNOWLEDGE.md``), in bytes.
DEFAULT_KNOWLEDGE_BUDGET = 16 * 1024
