"""What users install and what only the suite's development needs are kept
apart (issue 47): extras are the ones a user has a use for (each mirrored in
``elvin.extras``, which names them in its hints), the tools of `make` are PEP
735 dependency groups, and `make setup` installs both."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from elvin.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def names(requirements: list) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower()
            for r in requirements if isinstance(r, str)}


def test_extras_are_what_users_install():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert set(extras) == set(EXTRAS) | {"all"}
    # `all` is every extra (gui through apps)
    (everything,) = extras["all"]
    listed = set(re.fullmatch(r"elvin-suite\[(.+)\]", everything)[1].split(","))
    assert listed | {"gui"} == set(EXTRAS) and "elvin-suite[gui]" in extras["apps"]
    tools = {"pytest", "ruff", "mypy", "sphinx", "build", "twine"}
    assert not tools & names([r for reqs in extras.values() for r in reqs])


def test_the_groups_hold_the_tools_and_dev_includes_them_all():
    groups = PYPROJECT["dependency-groups"]
    assert {"pytest", "pytest-xdist", "hypothesis"} <= names(groups["test"])
    assert names(groups["lint"]) == {"ruff", "mypy"}
    assert {"sphinx", "myst-parser", "furo"} <= names(groups["docs"])
    assert names(groups["packaging"]) == {"build", "twine"}
    included = {entry["include-group"] for entry in groups["dev"] if isinstance(entry, dict)}
    assert included == set(groups) - {"dev"}


def test_make_setup_installs_all_extras_and_the_dev_group_with_a_pip_that_can():
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet -e '.[all]' --group dev" in makefile
    # --group came in pip 25.1; a fresh venv has the system Python's pip
    upgrade = re.search(r"pip install --quiet --upgrade 'pip>=(\d+)\.(\d+)'", makefile)
    assert upgrade and (int(upgrade[1]), int(upgrade[2])) >= (25, 1)
    assert makefile.index(upgrade[0]) < makefile.index("--group dev")
