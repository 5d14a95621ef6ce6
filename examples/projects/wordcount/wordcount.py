"""Count words in text."""

from collections import Counter


def count_words(text):
    """Return a mapping of each lower-cased word in ``text`` to how often it occurs.

    Words are separated by any run of whitespace (spaces, tabs, newlines).
    """
    words = [w.lower() for w in text.split(" ") if w]
    return dict(Counter(words))


def most_common(text, n=1):
    """Return the ``n`` most common words as ``(word, count)`` pairs."""
    return Counter(count_words(text)).most_common(n)
