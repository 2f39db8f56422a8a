#!/usr/bin/env python3
"""Production functions longer than a limit (issue 50: 150 lines), by
brace-matching each `fn` body in the .rs files under the given folders.
Tests are left out: `tests/` folders and `#[cfg(test)]` modules.

    python3 scripts/long-functions.py [--max 150] crates src

Prints `LINES FILE:LINE NAME`, longest first; a function that is better
whole says why in a comment at its top (the list is for reading, it fails
nothing).
"""
import argparse
import os
import re


def blank(s):
    """`s` with comments, strings and char literals blanked (newlines kept),
    so braces inside them do not count."""
    out, i, n = [], 0, len(s)
    while i < n:
        if s.startswith("//", i):
            j = s.find("\n", i)
            j = n if j < 0 else j
        elif s.startswith("/*", i):
            j = s.find("*/", i) + 2
        elif (m := re.match(r'b?r(#*)"', s[i:i + 10])) and (i == 0 or not (s[i - 1].isalnum() or s[i - 1] == "_")):
            end = '"' + m.group(1)
            j = s.find(end, i + len(m.group(0))) + len(end)
        elif s[i] == '"':
            j = i + 1
            while s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            j += 1
        elif s[i] == "'" and (m := re.match(r"'(\\.[^']*|[^'\\])'", s[i:i + 12])):
            j = i + len(m.group(0))
        else:
            out.append(s[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", s[i:j]))
        i = j
    return "".join(out)


def test_spans(s):
    """Character ranges of `#[cfg(test)]` items (a module or a function)."""
    spans = []
    for m in re.finditer(r"#\[cfg\(test\)\]", s):
        k = s.find("{", m.end())
        if k < 0:
            continue
        spans.append((m.start(), close(s, k)))
    return spans


def close(s, k):
    """Index of the brace closing the one at `k`."""
    depth = 0
    for e in range(k, len(s)):
        if s[e] == "{":
            depth += 1
        elif s[e] == "}":
            depth -= 1
            if depth == 0:
                return e
    return len(s) - 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=150)
    ap.add_argument("roots", nargs="+")
    a = ap.parse_args()
    rows = []
    for root in a.roots:
        for dp, _, files in os.walk(root):
            parts = dp.split(os.sep)
            if "tests" in parts or "target" in parts:
                continue
            for f in files:
                if not f.endswith(".rs"):
                    continue
                path = os.path.join(dp, f)
                s = blank(open(path, encoding="utf-8").read())
                tests = test_spans(s)
                for m in re.finditer(r"\bfn\s+(\w+)", s):
                    if any(lo <= m.start() <= hi for lo, hi in tests):
                        continue
                    k = m.end()
                    while k < len(s) and s[k] not in "{;":
                        k += 1
                    if k >= len(s) or s[k] == ";":
                        continue  # a declaration without a body
                    first = s.count("\n", 0, m.start()) + 1
                    last = s.count("\n", 0, close(s, k)) + 1
                    if last - first + 1 > a.max:
                        rows.append((last - first + 1, f"{path}:{first}", m.group(1)))
    for n, at, name in sorted(rows, reverse=True):
        print(f"{n:5d} {at} {name}")


if __name__ == "__main__":
    main()
