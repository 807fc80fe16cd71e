"""Pipeline tests: one SparkSession (local[2]) for the whole test session and
one generated archive of varied notifications shared by the tests."""

from __future__ import annotations

import os

import pytest
from pipeline_data import make_notifications, make_records

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark():
    from elvin.pipeline.session import spark_session

    session = spark_session("local[2]", "elvin-pipeline-tests", shuffle_partitions=2,
                            conf={"spark.default.parallelism": "2",
                                  "spark.sql.adaptive.coalescePartitions.enabled": "true"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def notifications() -> list[dict]:
    return make_notifications()


@pytest.fixture(scope="session")
def archive(tmp_path_factory, notifications) -> str:
    """The generated notifications, archived by ArchiveWriter (flushed now and
    then, so that some hours have several files)."""
    from elvin.pipeline.archive import ArchiveWriter

    directory = tmp_path_factory.mktemp("archive")
    writer = ArchiveWriter(directory, batch_rows=64, flush_seconds=0.5)
    for index, record in enumerate(make_records(notifications)):
        writer.append(record)
        if index % 150 == 149:
            assert writer.flush(timeout=30)
    writer.close()
    assert writer.invalid_values == 0
    return str(directory)
