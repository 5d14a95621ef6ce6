import unittest

from wordcount import count_words, most_common


class CountWordsTest(unittest.TestCase):
    def test_single_spaces(self):
        self.assertEqual(count_words("a b a"), {"a": 2, "b": 1})

    def test_any_whitespace_separates_words(self):
        self.assertEqual(count_words("the\tcat\nthe  end"), {"the": 2, "cat": 1, "end": 1})

    def test_case_is_folded(self):
        self.assertEqual(count_words("Go go GO"), {"go": 3})

    def test_most_common(self):
        self.assertEqual(most_common("x y x\nz x", 1), [("x", 3)])


if __name__ == "__main__":
    unittest.main()
