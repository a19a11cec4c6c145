"""Checks for wordfreq.top_words (run: python3 -m unittest -q test_wordfreq)."""

import unittest

from wordfreq import top_words


class TopWords(unittest.TestCase):
    def test_counts_plain_words(self) -> None:
        self.assertEqual(top_words("b a b c b a", 2), [("b", 3), ("a", 2)])

    def test_ignores_case(self) -> None:
        self.assertEqual(top_words("The cat saw the dog. THE end", 1), [("the", 3)])

    def test_ignores_punctuation(self) -> None:
        self.assertEqual(top_words("stop! Stop, stop... go; go", 2), [("stop", 3), ("go", 2)])

    def test_keeps_apostrophes_inside_words(self) -> None:
        self.assertEqual(top_words("don't don't do", 1), [("don't", 2)])

    def test_ties_are_alphabetical(self) -> None:
        self.assertEqual(
            top_words("pear apple fig fig apple pear", 3), [("apple", 2), ("fig", 2), ("pear", 2)]
        )

    def test_empty_text(self) -> None:
        self.assertEqual(top_words("  \n ", 5), [])


if __name__ == "__main__":
    unittest.main()
