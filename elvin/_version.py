"""The suite's version, written in this one place.

``pyproject.toml`` reads it at build time (setuptools' dynamic version), and every
tool's ``--version``, the router's Vendor-Identification and the apps' About boxes
and User-Agents import it, so a release changes this line only.
"""

__version__ = "0.1.0"
