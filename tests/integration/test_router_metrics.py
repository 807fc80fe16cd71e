"""``elvind --metrics`` read by the ecosystem's own parsers (issue 44): the
``prometheus_client`` text parser and its OpenMetrics parser find every
family with its type and help, OpenMetrics when the scraper asks for it
(``Accept``), ``HEAD`` answered, and ``promtool check metrics`` passes where
promtool is installed (``$PROMTOOL`` or on the PATH; Debian's ``prometheus``
package has it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request

import pytest

from elvin.router.metrics import exposition, wants_openmetrics
from tests.waiting import wait_until

from .process_util import ELVIND, free_port, stop, wait_listening

#: what Prometheus 2.x sends
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


@pytest.fixture(scope="module")
def metrics_router(tmp_path_factory):
    """An elvind with metrics and a federation link that cannot come up (so
    that the federation families have samples), and its metrics URL."""
    tmp = tmp_path_factory.mktemp("metrics")
    port, metrics_port, dead = free_port(), free_port(), free_port()
    config = tmp / "r.toml"
    config.write_text(f'listen = "elvin://127.0.0.1:{port}"\n'
                      f'status-file = "{tmp / "status.json"}"\n'
                      f'metrics = "127.0.0.1:{metrics_port}"\n'
                      '[federation]\nrouter_domain = "a"\nreconnect_min = 0.05\n'
                      'reconnect_max = 0.2\n[[federation.connect]]\nrouter = "b"\n'
                      f'url = "ewaf://127.0.0.1:{dead}"\n')
    proc = subprocess.Popen([*ELVIND, "--config", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(port, proc)
        wait_listening(metrics_port, proc)
        yield f"http://127.0.0.1:{metrics_port}/metrics"
    finally:
        stop(proc)
        proc.communicate()


def scrape(url: str, method: str = "GET", accept: str | None = None):
    request = urllib.request.Request(url, method=method,
                                     headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.status, reply.headers, reply.read().decode()


def families_of(parse, text: str) -> dict:
    return {family.name: family for family in parse(text)}


def assert_every_family_typed_and_helped(families: dict) -> None:
    assert families
    for name, family in families.items():
        assert family.type in ("counter", "gauge"), (name, family.type)
        assert family.documentation, name
        if family.type == "counter":
            assert not name.endswith("_total")
            assert all(s.name == f"{name}_total" for s in family.samples), family.samples


def test_the_text_format_parses_with_every_family_typed(metrics_router):
    from prometheus_client.parser import text_string_to_metric_families

    status, headers, text = scrape(metrics_router)
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    families = families_of(text_string_to_metric_families, text)
    assert_every_family_typed_and_helped(families)
    # the counters the issue found "unknown", federation's among them
    for name in ("elvind_drops", "elvind_connections_accepted", "elvind_reloads",
                 "elvind_federation_redials_failed", "elvind_archive_received"):
        assert families[name].type == "counter", name
    assert "# EOF" not in text
    assert "# TYPE elvind_drops_total counter" in text      # 0.0.4 names the samples


def test_openmetrics_when_the_scraper_asks_for_it(metrics_router):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    status, headers, text = scrape(metrics_router, accept=PROMETHEUS_ACCEPT)
    assert status == 200
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert text.endswith("# EOF\n")
    families = families_of(text_string_to_metric_families, text)
    assert_every_family_typed_and_helped(families)
    link = families["elvind_federation_link_up"]
    assert {s.labels["state"] for s in link.samples} == {"linked", "connecting", "down"}


def test_head_gets_the_headers_of_get_and_no_body(metrics_router):
    _, get_headers, text = scrape(metrics_router)
    status, headers, body = scrape(metrics_router, method="HEAD")
    assert status == 200 and body == ""
    assert headers["Content-Type"] == get_headers["Content-Type"]
    assert int(headers["Content-Length"]) > 0
    with pytest.raises(urllib.error.HTTPError) as info:
        scrape(metrics_router, method="POST")
    assert info.value.code == 405 and info.value.headers["Allow"] == "GET, HEAD"


def _promtool() -> str | None:
    return os.environ.get("PROMTOOL") or shutil.which("promtool")


@pytest.mark.skipif(_promtool() is None, reason="promtool is not installed (Debian: "
                    "prometheus; or set PROMTOOL)")
def test_promtool_check_metrics_passes(metrics_router):
    # the link has failed dials once the federation family has its samples
    wait_until(lambda: "elvind_federation_redials_failed_total{" in scrape(metrics_router)[2],
               what="a failed dial in the metrics")
    _, _, text = scrape(metrics_router)
    result = subprocess.run([_promtool(), "check", "metrics"], input=text,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_empty_status_is_still_valid_openmetrics():
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    families = families_of(text_string_to_metric_families, exposition({}, openmetrics=True))
    assert_every_family_typed_and_helped(families)


@pytest.mark.parametrize("accept, openmetrics", [
    ("", False), ("*/*", False), ("text/plain", False), (PROMETHEUS_ACCEPT, True),
    ("application/openmetrics-text", True),
    ("text/plain;version=0.0.4,application/openmetrics-text;q=0.5", False),
    ("application/openmetrics-text;q=0", False),
    ("text/html,application/xhtml+xml,*/*;q=0.8", False),
])
def test_accept_negotiation(accept, openmetrics):
    assert wants_openmetrics(accept) is openmetrics
