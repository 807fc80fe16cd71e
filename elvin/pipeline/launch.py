"""The ``elvin-pipeline`` console script: checks the ``[pipeline]`` extra
(PySpark, pyarrow, pandas, matplotlib) before importing the pipeline, so a
core-only install gets a one-line hint instead of an ImportError."""

from __future__ import annotations

from elvin.extras import launcher

main = launcher("elvin-pipeline", "pipeline", "elvin.pipeline.cli:main")
