"""The README's Listing 1 example prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def listing_1() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    (block,) = [b for b in blocks if "# the paper's Listing 1" in b]
    return block


def test_listing_1_prints_the_numbers_in_its_comments():
    code = listing_1()
    expected = [
        line.rsplit("#", 1)[1].strip()
        for line in code.splitlines()
        if line.startswith("print(")
    ]
    assert len(expected) == 2 and all(re.fullmatch(r"-?\d+\.\d+", e) for e in expected)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "listing_1"})  # noqa: S102
    assert out.getvalue().split() == expected
