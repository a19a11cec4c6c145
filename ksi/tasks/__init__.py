"""Task sources: where tasks come from (the built-in ``custom`` source lives here)."""
