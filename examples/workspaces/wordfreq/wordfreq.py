"""Count the most frequent words in a text.

Usage: python3 wordfreq.py FILE [N]
"""

from __future__ import annotations

import sys
from collections import Counter


def top_words(text: str, n: int) -> list[tuple[str, int]]:
    """The ``n`` most frequent words of ``text`` with their counts, most frequent first."""
    counts = Counter(text.split())
    return counts.most_common(n)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as fh:
        text = fh.read()
    n = int(argv[2]) if len(argv) == 3 else 10
    for word, count in top_words(text, n):
        print(f"{count:6d} {word}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
