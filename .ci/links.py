#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md resolves.

A link is `[text](target)`, `![alt](target)` or a reference definition `[label]: target`, outside
fenced code blocks and code spans. Links with a scheme (`https:`, `http:`, `mailto:`, ...) are not
checked. A relative target must name an existing file or directory (relative to the file that
links to it); a `#anchor` (alone, or after a path to a `.md` file) must name a heading of that
file, slugged as GitHub slugs headings: the heading's text lowercased, every character that is not
a letter, mark, digit, connector (`_`), space or `-` removed, spaces turned into `-`, and `-1`,
`-2`, ... appended to repeats. Exits 1 with the list of broken links.

Usage: python3 .ci/links.py [FILE.md ...]   (default: README.md and docs/*.md)
"""
import pathlib
import re
import sys
import unicodedata
import urllib.parse

root = pathlib.Path(__file__).resolve().parent.parent

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:(?!\n[ \t]*\n).)+?\1", re.S)
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*(<[^>]*>|\S+)", re.M)
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose_lines(text: str):
    """(line number, line) for every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                continue
            yield number, line
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                and not line.strip()[len(match.group(1)):].strip():
            fence = None


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.lower()
    kept = "".join(
        c for c in text
        if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc"
    )
    return kept.replace(" ", "-")


_anchors: dict[pathlib.Path, set[str]] = {}


def anchors(path: pathlib.Path) -> set[str]:
    if path not in _anchors:
        seen: dict[str, int] = {}
        found: set[str] = set()
        text = path.read_text(encoding="utf-8")
        for _, line in prose_lines(text):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
        _anchors[path] = found
    return _anchors[path]


def targets(text: str):
    """(line number, target) of every link in `text`, code blocks and code spans excluded; a
    link's text may run over several lines of its paragraph."""
    kept = [""] * (text.count("\n") + 1)
    for number, line in prose_lines(text):
        kept[number - 1] = line
    prose = "\n".join(kept)
    # Code spans end within their paragraph; blank them out (newlines kept, for line numbers).
    prose = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
    line_of = lambda offset: prose.count("\n", 0, offset) + 1
    for match in INLINE.finditer(prose):
        yield line_of(match.start()), match.group(1)
    for match in REFERENCE.finditer(prose):
        yield line_of(match.start()), match.group(1)


def check(doc: pathlib.Path) -> list[str]:
    broken = []
    shown = doc.relative_to(root)
    for number, target in targets(doc.read_text(encoding="utf-8")):
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1]
        if not target or SCHEME.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        path_part = urllib.parse.unquote(path_part)
        resolved = (doc.parent / path_part).resolve() if path_part else doc
        if not resolved.exists():
            broken.append(f"{shown}:{number}: {target}: no file {path_part}")
            continue
        if anchor and resolved.is_file() and resolved.suffix == ".md":
            if urllib.parse.unquote(anchor) not in anchors(resolved):
                where = resolved.relative_to(root) if resolved.is_relative_to(root) else resolved
                broken.append(f"{shown}:{number}: {target}: no heading #{anchor} in {where}")
    return broken


def main() -> int:
    files = [pathlib.Path(a).resolve() for a in sys.argv[1:]] or \
        [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    broken = [b for f in files for b in check(f)]
    if broken:
        print(f"{len(broken)} broken relative link(s):", file=sys.stderr)
        print("\n".join(broken), file=sys.stderr)
        return 1
    print(f"{len(files)} files: every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
