# SPDX-License-Identifier: MIT
"""The repository stands alone: no file refers to documents or tools
outside it (a user who clones it has none of them).  Fails naming each
file and line that does."""
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SKIP_DIRS = {".git", "build", "build-asan", "build-tsan", "build-fuzz", "build-deb",
             "__pycache__", "corpus", "results"}
# written in pieces so that this file does not match itself
OUTSIDE = re.compile("|".join([r"\.\./" + "shared", "/work/" + "shared",
                               r"(?<![\w/])" + "DESIGN" + r"\.md",
                               r"(?<![\w/])" + "STYLE" + r"\.md"]))


def text_files():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in files:
            path = os.path.join(top, name)
            try:
                with open(path, encoding="utf-8") as f:
                    yield path, f.read()
            except (UnicodeDecodeError, OSError):
                continue        # binary files (images, corpora)


def test_no_reference_outside_the_repository():
    hits = []
    for path, text in text_files():
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}")
    assert not hits, "references outside the repository:\n" + "\n".join(hits)
