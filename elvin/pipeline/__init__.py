"""The data pipeline: the router's traffic archive (Parquet) and PySpark jobs
over it -- subscription back-tests and traffic reports.

* ``elvin.pipeline.archive``: schema, ``ArchiveWriter``, ``read_archive``
  (pyarrow only; the router imports this without Spark).
* ``elvin.pipeline.backtest``: subscription AST -> Spark Column, ``backtest``.
* ``elvin.pipeline.report``: traffic report (CSV, PNG, HTML).
* ``elvin.pipeline.cli``: the ``elvin-pipeline`` command.

Nothing here imports PySpark at module import time except ``backtest``,
``report`` and ``session``.
"""
