"""Every ```python block of the README and docs/*.md runs, as written, against the test kit's
redis-servers (see docs_blocks.py for how a block's URLs are replaced), so the docs cannot
drift from the API."""

from __future__ import annotations

import pytest

from docs_blocks import REPO_ROOT, Block, blocks, broken_links

PYTHON_BLOCKS = blocks("python")


def test_the_python_pages_have_blocks():
    # Guards the extraction: the pages this test is for must be found to have examples.
    pages = {block.page for block in PYTHON_BLOCKS}
    assert {"README.md", "docs/python.md", "docs/deployments.md"} <= pages, pages


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[block.id for block in PYTHON_BLOCKS])
def test_the_block_runs(block: Block, url: str, redis, request):
    redis("FLUSHALL")  # each block starts from an empty server, as a reader's would
    several = None
    if block.uses_several_servers():
        several = [server.url for server in request.getfixturevalue("three_servers")]
    code = compile(block.with_urls(url, several), block.id, "exec")
    exec(code, {"__name__": "__docs__"})


def test_every_relative_link_of_the_docs_resolves():
    # The README's sections moved to docs/: a link to a page or heading that is gone fails here.
    assert broken_links() == []


def test_the_readme_stays_short():
    # The README is the front page (what, install, one example per language, links); the
    # guides live in docs/, one page per reader.
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move the details into docs/"
