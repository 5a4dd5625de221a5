"""The fenced code blocks of the README and docs/*.md, for the tests that run them.

A block connects to `redis://127.0.0.1:6379[/0]`, or to `redis://a:6379`, `redis://b:6379`,
`redis://c:6379` for several servers; `with_urls` puts the test kit's servers in their place.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# The one server of the examples, with or without the database number.
ONE_SERVER = re.compile(r"redis://127\.0\.0\.1:6379(?:/0)?(?![0-9/])")
# The servers of the several-server examples (MultiLock, RedLock), in order.
SEVERAL_SERVERS = ("redis://a:6379", "redis://b:6379", "redis://c:6379")

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^`\n]*)$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository, e.g. "docs/python.md"
    line: int  # of the block's first line of code
    language: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def uses_several_servers(self) -> bool:
        return any(url in self.code for url in SEVERAL_SERVERS)

    def with_urls(self, url: str, several: list[str] | None = None) -> str:
        code = ONE_SERVER.sub(url, self.code)
        if several is not None:
            for placeholder, real in zip(SEVERAL_SERVERS, several):
                code = code.replace(placeholder, real)
        return code


def pages() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def blocks(language: str) -> list[Block]:
    """Every block whose info string's first word is `language` (e.g. `python`), in page order."""
    found = []
    for page in pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        index = 0
        while index < len(lines):
            opening = FENCE.match(lines[index])
            if opening is None:
                index += 1
                continue
            start = index + 1
            index = start
            while index < len(lines) and lines[index].strip() != "```":
                index += 1
            if index >= len(lines):
                raise ValueError(f"{page}:{start}: a code block that is never closed")
            words = opening.group("info").replace(",", " ").split()
            if words and words[0] == language:
                code = textwrap.dedent("\n".join(lines[start:index])) + "\n"
                relative = page.relative_to(REPO_ROOT).as_posix()
                found.append(Block(relative, start + 1, language, code))
            index += 1
    return found


# A link in Markdown: [text](target), the target without spaces.
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces become dashes."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(anchor(line.lstrip("#")))
    return found


def broken_links() -> list[str]:
    """The relative links of the pages whose file or heading does not exist."""
    broken = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for match in LINK.finditer(text):
            target = match.group("target")
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            path, _, fragment = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO_ROOT)}: ({target})"
            if not file.exists():
                broken.append(f"{where}: no such file")
            elif fragment and file.suffix == ".md" and fragment not in anchors(file):
                broken.append(f"{where}: no such heading")
    return broken
