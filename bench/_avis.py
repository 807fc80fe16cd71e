"""The peer router for the side-by-side bench (not a bench itself): Avis 1.1.3,
built from its public source, and ``elvind``, started the same way.

Avis is found, or built, in this order:

1. ``$AVIS_HOME/dist/lib/avis-router.jar`` (``AVIS_HOME`` defaults to
   ``.avis`` in the repository, which git ignores);
2. else built there with ``../shared/tools/avis-build/build.sh`` (or
   ``$AVIS_BUILD``) from a git dir of the public repository avis-router/avis:
   ``$AVIS_GIT``, else the workplace's fetched mirror
   (``/work/.mirror/avis-router+avis/repo``);
3. else the bench runs ours alone and says why.

Both routers run in processes of their own, listening on loopback only, so
that ``process_cpu`` counts all of a router's threads (Avis's JIT and GC
threads too) and nothing of the load generator's. Avis gets a 2 GiB heap:
its own default (96 MiB) runs out before 100,000 subscriptions.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from _common import ROOT, free_port, start_elvind, stop_processes, wait_listening

__all__ = ["Router", "avis_available", "start_avis", "start_avis_pair", "start_ours",
           "start_ours_pair"]

AVIS_HOME = Path(os.environ.get("AVIS_HOME", ROOT / ".avis"))
AVIS_JAR = AVIS_HOME / "dist" / "lib" / "avis-router.jar"
AVIS_BUILD = Path(os.environ.get("AVIS_BUILD", ROOT.parent / "shared" / "tools" / "avis-build"
                                 / "build.sh"))
AVIS_GIT_CANDIDATES = [os.environ.get("AVIS_GIT", ""), "/work/.mirror/avis-router+avis/repo"]
JAVA_OPTS = os.environ.get("AVISD_JAVA_OPTS", "-Xms256M -Xmx2G -XX:+UseParallelGC").split()


@dataclass
class Router:
    """A running router: its client port, the pids whose CPU is its, the
    processes to stop."""

    name: str
    ports: list[int]
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.ports[0]

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(proc.pid for proc in self.procs)

    def stop(self) -> None:
        stop_processes(self.procs)


def avis_available() -> tuple[bool, str]:
    """(True, how) once the Avis jar is there, building it if it can; else
    (False, why not)."""
    if AVIS_JAR.exists():
        return True, f"Avis from {AVIS_JAR}"
    git_dir = next((g for g in AVIS_GIT_CANDIDATES if g and Path(g).exists()), None)
    if git_dir is None:
        return False, ("no Avis: set AVIS_HOME to a build, or AVIS_GIT to a git dir of "
                       "avis-router/avis")
    if not AVIS_BUILD.exists():
        return False, f"no Avis: its build script {AVIS_BUILD} is missing"
    if subprocess.run(["which", "javac"], capture_output=True).returncode != 0:
        return False, "no Avis: javac (a JDK 17+) is not installed"
    result = subprocess.run(["bash", str(AVIS_BUILD), git_dir], capture_output=True, text=True,
                            env={**os.environ, "AVIS_HOME": str(AVIS_HOME)})
    if result.returncode != 0 or not AVIS_JAR.exists():
        return False, f"no Avis: building it failed: {result.stderr.strip()[-300:]}"
    return True, f"Avis built from {git_dir} into {AVIS_HOME}"


def _start_avis_process(config: list[str], port: int, deadline: float) -> subprocess.Popen:
    path = Path(tempfile.mkdtemp(prefix="avis-bench-")) / "avisd.config"
    path.write_text("\n".join(config) + "\n")
    proc = subprocess.Popen(["java", *JAVA_OPTS, "-jar", str(AVIS_JAR), "-c", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_listening(proc, port, deadline)
    return proc


def start_avis() -> Router:
    port = free_port()
    proc = _start_avis_process([f"Listen=elvin://127.0.0.1:{port}", "Federation.Activated=no"],
                               port, time.monotonic() + 60)
    return Router("Avis", [port], [proc])


def start_ours(max_subscriptions: int | None = None) -> Router:
    port = free_port()
    args = ["--listen", f"elvin://127.0.0.1:{port}"]
    if max_subscriptions is not None:
        config = Path(tempfile.mkdtemp(prefix="elvin-bench-")) / "elvind.toml"
        config.write_text(f"max-subscriptions = {max_subscriptions}\ndiscovery = false\n")
        args += ["--config", str(config)]
    proc = start_elvind(*args)
    wait_listening(proc, port, time.monotonic() + 30)
    return Router("ours", [port], [proc])


def start_avis_pair() -> Router:
    """Two Avis routers joined by one federation link: ports [producer's,
    consumer's]; the second connects to the first, everything both ways."""
    ports = [free_port(), free_port()]
    fed = free_port()
    deadline = time.monotonic() + 60
    first = _start_avis_process([
        f"Listen=elvin://127.0.0.1:{ports[0]}", "Federation.Activated=yes",
        "Federation.Router-Name=avis-a", f"Federation.Listen=ewaf://127.0.0.1:{fed}",
        "Federation.Subscribe[Peer]=require(Seq)", "Federation.Provide[Peer]=TRUE",
        "Federation.Apply-Class[Peer]=@127.0.0.1 @localhost"], ports[0], deadline)
    try:
        second = _start_avis_process([
            f"Listen=elvin://127.0.0.1:{ports[1]}", "Federation.Activated=yes",
            "Federation.Router-Name=avis-b", f"Federation.Connect[Peer]=ewaf://127.0.0.1:{fed}",
            "Federation.Subscribe[Peer]=require(Seq)", "Federation.Provide[Peer]=TRUE"],
            ports[1], deadline)
    except BaseException:
        stop_processes([first])
        raise
    return Router("Avis", ports, [first, second])


def start_ours_pair() -> Router:
    """Two ``elvind`` joined by one federation link (trees, exactly-once
    routing on): ports [producer's, consumer's]."""
    ports = [free_port(), free_port()]
    fed = [free_port(), free_port()]
    tmp = Path(tempfile.mkdtemp(prefix="elvin-bench-"))
    procs = []
    for i in range(2):
        text = [f'listen = "elvin://127.0.0.1:{ports[i]}"', "discovery = false",
                "[federation]", f'router_domain = "r{i}"',
                f'listen = "ewaf://127.0.0.1:{fed[i]}"', "debounce = 0.01",
                "reconnect_min = 0.1", 'routing = "trees"']
        if i == 1:
            text += ["[[federation.connect]]", 'router = "r0"', f'url = "ewaf://127.0.0.1:{fed[0]}"',
                     "outgoing = true", "incoming = true"]
        else:
            text += ["[[federation.accept]]", 'router = "r1"', "outgoing = true",
                     "incoming = true"]
        path = tmp / f"r{i}.toml"
        path.write_text("\n".join(text) + "\n")
        procs.append(start_elvind("--config", str(path)))
    try:
        deadline = time.monotonic() + 30
        for proc, port in zip(procs, ports, strict=True):
            wait_listening(proc, port, deadline)
    except BaseException:
        stop_processes(procs)
        raise
    return Router("ours", ports, procs)
