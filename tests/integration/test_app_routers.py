"""Every app's config names several routers (failover) or a discovery scope
(issue 49, point 1): the suite's router rule (``elvin.router_url``) turns
either into the list ``elvin.connect`` fails over among."""

from __future__ import annotations

import argparse

import pytest

from elvin.app_cli import configured_router
from elvin.client import connect
from elvin.config_file import ConfigError
from elvin.router_url import CONFIG, DISCOVERY, ENV, FLAG, RouterURLError, choose_router_url
from tests.waiting import until

A, B = "elvin://a.example:2917", "elvin://b.example:2918"


def test_several_urls_on_the_command_line_in_the_environment_and_in_the_file():
    flag = choose_router_url(f"{A} {B}", environ={}, several=True)
    assert (flag.source, flag.url, flag.urls, flag.routers) == (FLAG, A, (A, B), [A, B])
    env = choose_router_url(None, environ={"ELVIN_URL": f" {B}\t{A} "}, several=True)
    assert (env.source, env.routers) == (ENV, [B, A])
    file = choose_router_url(None, [A, B], environ={}, several=True)
    assert (file.source, file.routers) == (CONFIG, [A, B])
    one = choose_router_url(A, environ={}, several=True)
    assert one.routers == A                      # one router: a str, as before


def test_a_command_that_takes_one_router_says_so():
    with pytest.raises(RouterURLError, match="names 2 routers; this command takes one"):
        choose_router_url(f"{A} {B}", environ={}, what="Elvin URI")
    # $ELVIN_URL set for the apps' failover: such a command takes the first
    assert choose_router_url(None, environ={"ELVIN_URL": f"{A} {B}"}).routers == A


def test_a_bad_url_in_a_list_is_named_with_where_it_came_from():
    with pytest.raises(RouterURLError, match=r"'http://b' \(from \$ELVIN_URL\)"):
        choose_router_url(None, environ={"ELVIN_URL": f"{A} http://b"}, several=True)


@pytest.mark.parametrize("app", ["tickertape", "biff", "console", "newswatcher",
                                 "filewatcher"])
def test_every_app_config_takes_a_list_and_a_scope(app, tmp_path):
    path = tmp_path / f"{app}.toml"
    path.write_text(f'elvin = ["{A}", "{B}"]\nscope = "office"\n'
                    + ('[[feeds]]\nname = "x"\nurl = "https://x.example/feed"\n'
                       if app == "newswatcher" else ""))
    config = _load(app, path)
    assert config.elvin == [A, B] and config.scope == "office"
    path.write_text("elvin = [1, 2]\n")
    with pytest.raises(ConfigError, match="elvin"):
        _load(app, path)
    path.write_text('scope = "a:b"\n')
    with pytest.raises(ConfigError, match="scope"):
        _load(app, path)


def _load(app: str, path):
    if app == "tickertape":
        from elvin_apps.tickertape.config import load
        return load(path, must_exist=True)
    if app == "biff":
        from elvin_apps.biff.config import load
        return load(path, must_exist=True)
    if app == "console":
        from elvin_apps.console.config import load
        return load(path, must_exist=True)
    if app == "newswatcher":
        from elvin_apps.newswatcher.config import load
        return load(path, must_exist=True)
    from elvin_apps.filewatcher.config import load_config
    return load_config(path)


async def test_a_scope_in_the_config_is_every_router_of_that_scope(make_router, tmp_path,
                                                                   monkeypatch):
    def discoverable(scope: str):
        router = make_router(discovery=True, discovery_address="127.0.0.1",
                             discovery_port=0, discovery_scope=scope)
        return router, f"127.0.0.1:{router.router.discovery.port}"

    (first, w1), (second, w2), (_other, w3) = (discoverable("office"), discoverable("office"),
                                               discoverable("elsewhere"))
    monkeypatch.setenv("ELVIN_DISCOVERY", ",".join((w1, w2, w3)))
    monkeypatch.delenv("ELVIN_URL", raising=False)
    path = tmp_path / "biff.toml"
    path.write_text('scope = "office"\n')
    from elvin_apps.biff.config import load

    args = argparse.Namespace(config=str(path), elvin=None)
    _config, choice = await _in_thread(lambda: configured_router(load, args, discover=False))
    assert choice.source == DISCOVERY and "office" in choice.where
    assert sorted(choice.urls) == sorted([first.url, second.url])
    # the list is a failover list: lose the router, carry on at the other
    conn = await connect(choice.routers, reconnect_delay=0.05)
    try:
        at = conn.url
        gone = first if at.endswith(f":{first.port}") else second
        await _in_thread(gone.stop)
        await until(lambda: conn.url != at and conn.state == "open", what="the failover")
    finally:
        await conn.close()


async def _in_thread(fn):
    import asyncio
    return await asyncio.get_running_loop().run_in_executor(None, fn)
