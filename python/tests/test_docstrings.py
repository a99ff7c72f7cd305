"""The examples in the docstrings run and give what they show."""

import doctest

import markerscope


def test_docstring_examples():
    result = doctest.testmod(markerscope, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10
    assert result.failed == 0
