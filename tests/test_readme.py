"""The README is whole: its links stay inside the repository, and its command table
names commands that exist."""

from __future__ import annotations

import re
from pathlib import Path

import click

from appliance.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_link_points_at_a_file_of_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text()
        assert "../shared" not in text, doc
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://")):
                # A clone is the whole story: the README points nowhere outside it.
                assert doc.name != "README.md", f"README.md links outside: {target}"
                continue
            if target.startswith(("#", "mailto:")):
                continue
            path = (doc.parent / target.split("#")[0]).resolve()
            assert path.is_relative_to(ROOT) and path.exists(), f"{doc.name}: {target}"


def test_the_command_table_names_real_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `appliance ([a-z]+)(?: ([a-z]+))?", readme, re.M)
    assert {"serve", "demo", "config", "key", "import", "doctor"} <= {r[0] for r in rows}
    for name, sub in rows:
        command = main.get_command(click.Context(main), name)
        assert command is not None, name
        if isinstance(command, click.Group) and sub:
            assert sub in command.commands, f"appliance {name} {sub}"
