from __future__ import annotations

import pytest

from workflows.engine import detect_content_type


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('{"name": "x", "items": [1, 2]}', "json"),
        ("[1, 2, 3]", "json"),
        ('```json\n{"a": 1}\n```', "json"),
        ("```python\ndef f():\n    return 1\n```", "code"),
        ("Here you go:\n```\nls -la\n```\nEnjoy.", "code"),
        ("def add(a, b):\n    return a + b\n\nprint(add(1, 2))", "code"),
        ("const x = 1;\nlet y = x + 2;\nconsole.log(y);", "code"),
        ("import os", "code"),
        ("    return total", "code"),
        ("total = add(1, 2);  ", "code"),
        ("if (ready) {", "code"),
        ("classic stories never end", "prose"),
        ("A definition follows: def", "prose"),
        ("2, 3, 5, 7, 11, 13", "numbers"),
        ("1.5\n2.25\n-3\n4e10\n50%", "numbers"),
        ("- apples\n- pears\n- plums", "list"),
        ("1. Mix the flour\n2. Add water\n3) Bake", "list"),
        ("Shopping:\n* eggs\n* milk\n* bread", "list"),
        ("The dragon slept under the bridge. In the morning it flew away.", "prose"),
        ("There are 3 dragons and 12 knights in the story.", "prose"),
        ("Note: set x = 5 before you start the exercise, then continue.", "prose"),
        ("{not json at all", "prose"),
        ("", "prose"),
        ("   \n  ", "prose"),
    ],
)
def test_it_detects_the_content_type_by_rules(text: str, kind: str) -> None:
    assert detect_content_type(text) == kind
