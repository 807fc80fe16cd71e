"""Package discovery that pyproject.toml cannot express.

``apps/`` is installed as the import package ``elvin_apps`` (docs/architecture.md), and
setuptools' declarative ``find`` does not follow a renamed directory, so the
app packages are listed here, found afresh on every build.
"""

from setuptools import find_packages, setup

app_packages = ["elvin_apps"] + [f"elvin_apps.{name}" for name in find_packages("apps")]

setup(
    packages=find_packages(include=["elvin", "elvin.*"]) + app_packages,
    package_dir={"elvin_apps": "apps"},
)
