"""Package discovery and data files that pyproject.toml cannot express.

``apps/`` is installed as the import package ``elvin_apps`` (docs/architecture.md), and
setuptools' declarative ``find`` does not follow a renamed directory, so the
app packages are listed here, found afresh on every build.

The man pages (``man/man1``, ``man/man8``, generated from the commands' parsers by
``make man``; ``make package-check`` does it before building) are installed under
``share/man`` of the environment, where ``man`` finds them for a venv whose ``bin``
is on ``PATH``. A tree without them (not generated) installs without pages.
"""

from pathlib import Path

from setuptools import find_packages, setup

app_packages = ["elvin_apps"] + [f"elvin_apps.{name}" for name in find_packages("apps")]

setup(
    packages=find_packages(include=["elvin", "elvin.*"]) + app_packages,
    package_dir={"elvin_apps": "apps"},
    data_files=[(f"share/man/{section.name}", sorted(str(p) for p in section.iterdir()))
                for section in sorted(Path("man").glob("man[0-9]"))],
)
