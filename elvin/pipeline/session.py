"""Starting Spark for the pipeline: Java check, session settings, progress."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path
from typing import TextIO

__all__ = ["JavaNotFoundError", "LOCAL_JAVA_OPTIONS", "SESSION_CONF", "Progress", "find_java", "spark_session"]

#: Settings every pipeline session needs. ``spark.sql.ansi.enabled=false`` is
#: required by the back-test: Elvin integer arithmetic wraps around (as in
#: Java) and integer division by zero is bottom (NULL), which is Spark's
#: non-ANSI behaviour; Spark 4 turns ANSI mode on by default, where overflow
#: raises an error instead. ``spark.python.sql.dataFrameDebugging.enabled``
#: is off because PySpark otherwise records the Python call site of every
#: Column function (a stack walk and JVM round trips each): a subscription
#: becomes hundreds of Column calls, and translating one took about three
#: times as long with it on.
SESSION_CONF = {
    "spark.sql.ansi.enabled": "false",
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}


#: JVM options for a ``local`` master. Local runs are small (a test, a
#: back-test from the console, an archive on one machine) and dominated by
#: the JVM's start-up, not by steady-state speed: C1-only JIT and the serial
#: collector start Spark about a third sooner on two cores (measured with
#: ``elvin-pipeline backtest`` on a 40-row archive). A cluster master keeps
#: the JVM's defaults; ``conf={"spark.driver.extraJavaOptions": ...}`` wins.
LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto"

#: Spark's log configuration (log4j2): fatal errors only, and none of the
#: banner and warnings Spark's default profile prints on every run
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


class JavaNotFoundError(RuntimeError):
    """No Java runtime: Spark cannot start."""


def find_java() -> str:
    """Path of the ``java`` Spark will run, or ``JavaNotFoundError``."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise JavaNotFoundError(f"JAVA_HOME is {home}, but {candidate} is not an executable "
                                "java; fix JAVA_HOME or unset it to use java from PATH")
    found = shutil.which("java")
    if found is None:
        raise JavaNotFoundError("Spark needs a Java runtime (Java 17 or 21), and there is no "
                                "java on PATH and no JAVA_HOME; install one (e.g. "
                                "'apt install openjdk-17-jre-headless') or set JAVA_HOME")
    return found


def spark_session(master: str = "local[*]", app_name: str = "elvin-pipeline", *,
                  shuffle_partitions: int | None = None, ui: bool = False,
                  conf: dict[str, str] | None = None, log_level: str = "FATAL"):
    """A SparkSession configured for the pipeline (see ``SESSION_CONF``).

    For a ``local`` master, ``SPARK_LOCAL_IP`` defaults to 127.0.0.1 so that a
    machine with an odd host name still starts, and ``PYSPARK_PYTHON`` to
    this interpreter. Raises ``JavaNotFoundError``
    before trying to start the JVM when there is no Java. Spark logs at
    ``log_level`` (log4j's names); at ``FATAL`` (the default) only fatal
    errors from the JVM's start on (``LOG4J_CONFIG``), so that a run prints
    what the pipeline says and no Java banner or stack trace.
    """
    find_java()
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python workers (pandas UDFs) must run this interpreter, not "python3"
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    settings = dict(SESSION_CONF)
    settings["spark.ui.enabled"] = "true" if ui else "false"
    if shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    elif master.startswith("local"):
        settings["spark.sql.shuffle.partitions"] = "8"
    java_options = []
    if log_level.upper() == "FATAL":      # else Spark's own profile, for debugging
        java_options.append(f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}")
    if master.startswith("local"):
        java_options.append(LOCAL_JAVA_OPTIONS)
    if java_options:
        settings["spark.driver.extraJavaOptions"] = " ".join(java_options)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    _launch_quiet_gateway({"spark.master": master, "spark.app.name": app_name, **settings})
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    for key in ("spark.sql.ansi.enabled", "spark.sql.session.timeZone"):
        spark.conf.set(key, settings[key])
    return spark


#: what the JVM says on every start because Spark's launcher always adds
#: ``--add-modules=jdk.incubator.vector`` (no setting turns it off): noise
#: for whoever runs a pipeline command, and nothing they can act on
JVM_NOISE = (b"WARNING: Using incubator modules",)


def _launch_quiet_gateway(settings: dict[str, str]) -> None:
    """Start Spark's JVM (as ``SparkContext`` would, with ``settings`` on its
    command line) with its stderr read by a thread that passes every line on
    but ``JVM_NOISE``. Nothing when a JVM is already running or PySpark was
    handed one (``PYSPARK_GATEWAY_PORT``)."""
    import subprocess
    import threading

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_pass_stderr, args=(gateway.proc.stderr,), daemon=True,
                     name="spark-stderr").start()
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def _pass_stderr(stream) -> None:
    """Copy the JVM's stderr to ours, line by line, without ``JVM_NOISE``."""
    for line in iter(stream.readline, b""):
        if line.startswith(JVM_NOISE):
            continue
        out = getattr(sys.stderr, "buffer", None)
        try:
            if out is not None:
                out.write(line)
            else:
                sys.stderr.write(line.decode("utf-8", "replace"))
            sys.stderr.flush()
        except (OSError, ValueError):       # our stderr is gone: keep draining the pipe
            pass
    stream.close()


class Progress:
    """Shows running Spark stages on a terminal (``stderr``), polling the
    status tracker; does nothing when the stream is not a TTY.

    ``with Progress(spark, "back-test"): ...``
    """

    def __init__(self, spark, label: str, stream: TextIO | None = None,
                 interval: float = 0.5, force: bool = False) -> None:
        self.spark = spark
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.enabled = force or (hasattr(self.stream, "isatty") and self.stream.isatty())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = 0
        self.lines: list[str] = []

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if self._shown:
                self.stream.write("\r" + " " * self._shown + "\r")
                self.stream.flush()

    def status(self) -> str | None:
        tracker = self.spark.sparkContext.statusTracker()
        parts = []
        for stage_id in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(stage_id)
            if info is None:
                continue
            parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks"
                         + (f" ({info.numActiveTasks} running)" if info.numActiveTasks else ""))
        if not parts:
            return None
        return f"{self.label}: " + "; ".join(parts)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                line = self.status()
            except Exception:  # noqa: BLE001 -- the display must never break a job
                return
            if line is None:
                continue
            self.lines.append(line)
            padded = line.ljust(self._shown)
            self._shown = len(line)
            self.stream.write("\r" + padded)
            self.stream.flush()
