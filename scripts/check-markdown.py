#!/usr/bin/env python3
"""Checks that Markdown files render as written: code fences balance and
headings are headings (CommonMark's rules for fences and ATX headings).

    python3 scripts/check-markdown.py [FILE.md ...]   # default: every tracked *.md
    python3 scripts/check-markdown.py --self-test     # each check catches its case

What it reports (file:line: why), exit status 1 if anything:
  * a file that ends inside a code block (an unclosed fence);
  * an empty fenced block (an opening fence closed on the next line: a stray
    fence, which turns what follows inside out);
  * an opening fence with a language (```sh) met inside a code block: an
    earlier fence is unbalanced, so the text between is swallowed;
  * a heading swallowed by a code block without a language (a line such as
    "## Title" between blank lines in a block whose fence names no language);
  * "#Title": a hash line without the space a heading needs.
"""

import re
import subprocess
import sys

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+.*)?$")
NOT_HEADING = re.compile(r"^ {0,3}#{1,6}[^# \t]")
SWALLOWED_HEADING = re.compile(r"^#{1,6} [A-Z][^`|]*$")


def problems(path, lines):
    """Yields (line number, message) for each problem in the file's lines."""
    fence = None  # (character, length, line number, language) of the open block
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\n")
        match = FENCE.match(line)
        if fence is None:
            if match:
                marks, info = match.group(2), match.group(3).strip()
                if marks[0] == "`" and "`" in info:
                    continue  # inline code, not a fence
                fence = (marks[0], len(marks), number, info)
                continue
            if NOT_HEADING.match(line) and not line.lstrip().startswith("#!"):
                yield number, "a hash line without a space after the #s is not a heading"
            continue
        char, length, opened, language = fence
        if match:
            marks, info = match.group(2), match.group(3).strip()
            if marks[0] == char and len(marks) >= length and not info:
                if opened == number - 1:
                    yield opened, "an empty code block (a stray fence?): it turns the text after it inside out"
                fence = None
                continue
            # A fence as long as the block's, with a language: meant to open
            # one (a longer fence around it would mean nesting on purpose).
            if marks[0] == char and len(marks) >= length and info and not info.startswith(char):
                yield number, (
                    f"an opening fence ({marks}{info}) inside the code block opened at line "
                    f"{opened}: a fence before it is unbalanced"
                )
        if (
            not language
            and SWALLOWED_HEADING.match(line)
            and number >= 2
            and not lines[number - 2].strip()
        ):
            yield number, (
                f"a heading inside the code block opened at line {opened} "
                "(a fence before it is unbalanced?)"
            )
    if fence is not None:
        yield fence[2], "this code block is never closed"


SELF_TEST = [
    # (Markdown, the problems expected as (line, start of the message))
    ("# T\n\n```sh\nls\n```\n\n## Next\n", []),
    ("````md\n```sh\n````\n", []),
    ("```\n```\ntext\n```\n\n## Swallowed\n\n```sh\nls\n```\n", [
        (1, "an empty code block"),
        (6, "a heading inside the code block"),
        (8, "an opening fence (```sh)"),
    ]),
    ("```sh\nls\n", [(1, "this code block is never closed")]),
    ("#Title\n", [(1, "a hash line without a space")]),
]


def self_test():
    """Runs every check on a sample it must (or must not) catch."""
    failed = 0
    for text, expected in SELF_TEST:
        lines = text.splitlines(keepends=True)
        got = list(problems("sample", lines))
        matched = len(got) == len(expected) and all(
            line == want_line and message.startswith(want)
            for (line, message), (want_line, want) in zip(got, expected)
        )
        if not matched:
            print(f"self-test: {text!r}: expected {expected}, got {got}", file=sys.stderr)
            failed += 1
    if failed:
        return 1
    print(f"check-markdown: self-test passed ({len(SELF_TEST)} samples)")
    return 0


def main(argv):
    """Checks the files named, or every Markdown file git tracks."""
    if argv == ["--self-test"]:
        return self_test()
    if argv:
        paths = argv
    else:
        listed = subprocess.run(
            ["git", "ls-files", "*.md"], check=True, capture_output=True, text=True
        )
        paths = listed.stdout.split()
    found = 0
    for path in paths:
        with open(path, encoding="utf-8") as file:
            lines = file.readlines()
        for number, message in problems(path, lines):
            print(f"{path}:{number}: {message}", file=sys.stderr)
            found += 1
    if found:
        print(f"check-markdown: {found} problem(s) in {len(paths)} file(s)", file=sys.stderr)
        return 1
    print(f"check-markdown: {len(paths)} file(s) render as written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
