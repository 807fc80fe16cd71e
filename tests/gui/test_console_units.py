"""elvin-console's pure parts: typed values, keys, the ring buffer, rates,
diffs, exports, the workspace and config files, completion helpers."""

from __future__ import annotations

import asyncio
import csv
import io
import math
import tomllib

import pytest
from elvin_apps.console.chart import format_number, nice_ticks
from elvin_apps.console.completion import escape_name, word_before
from elvin_apps.console.config import ConfigError
from elvin_apps.console.config import load as load_config
from elvin_apps.console.diff import diff_notifications
from elvin_apps.console.export import (
    format_for_path,
    read_json_lines,
    to_csv,
    to_ec_text,
    to_json_lines,
)
from elvin_apps.console.keytext import KeySpec, KeyTextError, parse_key_line
from elvin_apps.console.quenchview import parse_names
from elvin_apps.console.rate import RateMeter
from elvin_apps.console.received import Received, display_value
from elvin_apps.console.repeat import Repeater
from elvin_apps.console.ringbuffer import RingBuffer
from elvin_apps.console.typed import TypedValueError, parse_typed, type_name, value_text
from elvin_apps.console.workspace import (
    AttributeSpec,
    ConsumerSpec,
    ProducerSpec,
    QuenchSpec,
    RouterSpec,
    RouterViewSpec,
    Workspace,
    WorkspaceError,
    dumps,
    load,
    loads,
    save,
)

from elvin import tomlwrite
from elvin.keys import Keys, KeyScheme, public_key
from elvin.text import parse_notifications
from elvin.values import Int64

# -- typed values ------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "text", "value"), [
    ("int32", "42", 42), ("int32", " -0x2A ", -42), ("int32", "1_000", 1000),
    ("int64", "42", Int64(42)), ("int64", "9000000000L", Int64(9_000_000_000)),
    ("real64", "3.5", 3.5), ("real64", "-1e-3", -0.001), ("string", " spaced ", " spaced "),
    ("opaque", "de ad BE ef", b"\xde\xad\xbe\xef"), ("opaque", "[0102]", b"\x01\x02"),
    ("opaque", "", b""),
])
def test_parse_typed_accepts(kind, text, value):
    parsed = parse_typed(kind, text)
    assert parsed == value and type_name(parsed) == kind


def test_parse_typed_nan_and_infinity():
    assert math.isnan(parse_typed("real64", "NaN"))
    assert parse_typed("real64", "-Infinity") == -math.inf


@pytest.mark.parametrize(("kind", "text", "words"), [
    ("int32", "4x", "not a whole number"),
    ("int32", "3000000000", "outside the int32 range"),
    ("int32", "", "needs a value"),
    ("int64", "1.5", "not a whole number"),
    ("int64", str(2**63), "outside the int64 range"),
    ("real64", "abc", "not a number"),
    ("real64", "1e999", "too large"),
    ("opaque", "abc", "odd count"),
    ("opaque", "zz", "not a hex digit"),
    ("string", "a\x00b", "NUL"),
])
def test_parse_typed_rejects_with_clear_messages(kind, text, words):
    with pytest.raises(TypedValueError) as info:
        parse_typed(kind, text)
    assert words in str(info.value)


def test_int32_overflow_suggests_int64():
    with pytest.raises(TypedValueError, match="choose int64"):
        parse_typed("int32", "3000000000")


@pytest.mark.parametrize("value", [7, Int64(7), 2.5, float("nan"), "x\ny", b"\x00\xff", -0.0])
def test_value_text_round_trips(value):
    back = parse_typed(type_name(value), value_text(value))
    assert type_name(back) == type_name(value)
    assert back == value or (isinstance(value, float) and math.isnan(back))


# -- keys --------------------------------------------------------------------------------

def test_key_lines():
    assert parse_key_line("[de ad]") == b"\xde\xad"
    assert parse_key_line('"a \\"b\\""') == b'a "b"'
    with pytest.raises(KeyTextError, match="expected"):   # bare text: refused, as by ec
        parse_key_line("plain secret")
    with pytest.raises(KeyTextError):
        parse_key_line("[zz]")
    with pytest.raises(KeyTextError, match="producer key line 2"):
        KeySpec(['"ok"', "[1]"]).raw()


def test_key_spec_builds_scheme_keys():
    spec = KeySpec(producer=['"p"'], consumer=[])
    notification = spec.notification_keys()
    subscription = spec.subscription_keys()
    assert notification == Keys.for_notification(producer=[b"p"])
    assert subscription.key_set(KeyScheme.SHA1_PRODUCER) == {public_key(b"p")}
    assert KeySpec().notification_keys() is None and not KeySpec()
    assert spec.describe() == "1 producer"


# -- ring buffer, rate, diff ---------------------------------------------------------------

def test_ring_buffer_drops_oldest_and_indexes():
    ring: RingBuffer[int] = RingBuffer(3)
    ring.extend([1, 2, 3])
    with pytest.raises(OverflowError):
        ring.append(4)
    assert ring.drop_oldest(2) == 2
    ring.extend([4, 5])
    assert list(ring) == [3, 4, 5] and ring[0] == 3 and ring[-1] == 5
    assert ring.resize(2) == 1 and list(ring) == [4, 5]
    assert ring.resize(5) == 0 and ring.room() == 3
    with pytest.raises(IndexError):
        ring[2]


def test_rate_meter_window():
    meter = RateMeter(window=2.0)
    meter.add(0, 0.0)
    meter.add(100, 1.0)
    meter.add(100, 2.0)
    assert meter.rate(2.0) == pytest.approx(100.0)
    assert meter.rate(5.0) == 0.0
    assert meter.total == 200


def test_diff_by_type_and_value():
    previous = {"a": 1, "b": "x", "gone": 2.0, "nan": float("nan")}
    current = {"a": Int64(1), "b": "x", "new": b"", "nan": float("nan")}
    kinds = {c.name: c.kind for c in diff_notifications(previous, current)}
    assert kinds == {"a": "changed", "b": "same", "new": "added", "nan": "same",
                     "gone": "removed"}
    assert {c.kind for c in diff_notifications(None, current)} == {"added"}


# -- export ----------------------------------------------------------------------------------

ROWS = [
    Received(1, 1_700_000_000.123, {"Text": 'say "hi"\nnow', "N": 5, "Big": Int64(7),
                                    "R": 1.5, "Bytes": b"\xde\xad"}, True),
    Received(2, 1_700_000_001.0, {"Text": "b", "R": float("inf")}, False),
]


def test_ec_export_reads_back_exactly():
    text = to_ec_text(ROWS)
    assert text.startswith("$time 2023-11-")
    back = parse_notifications(text)
    assert back == [row.attributes for row in ROWS]
    assert type(back[0]["Big"]) is Int64 and type(back[0]["N"]) is int


def test_json_lines_export_keeps_types():
    back = read_json_lines(to_json_lines(ROWS))
    assert back == [row.attributes for row in ROWS]
    assert isinstance(back[0]["Big"], Int64) and back[0]["Bytes"] == b"\xde\xad"


def test_csv_export_columns_and_typed_cells():
    rows = list(csv.reader(io.StringIO(to_csv(ROWS))))
    assert rows[0] == ["time", "secure", "Text", "N", "Big", "R", "Bytes"]
    assert rows[1][1] == "yes" and rows[1][4] == "7L" and rows[1][6] == "[de ad]"
    assert rows[2][3] == "" and rows[2][5] == "Infinity"


def test_format_for_path():
    assert format_for_path("a.csv") == "csv" and format_for_path("a.jsonl") == "jsonl"
    assert format_for_path("a.ec") == "ec" and format_for_path("a.unknown") == "ec"


def test_display_value():
    assert display_value("a\nb") == "a⏎b"
    assert display_value(Int64(3)) == "3"
    assert display_value(b"\x01" * 70).endswith("…]")


# -- workspace -------------------------------------------------------------------------------

def _workspace() -> Workspace:
    return Workspace(
        [RouterSpec("local", "elvin://127.0.0.1:2917", ['"secret"'], ["[de ad]"],
                    {"Subscription.Max-Count": 100, "Big": Int64(2**40)})],
        [ConsumerSpec(title="Prices", router="local", subscription='Price > 1.5 && x == "a"',
                      subscribed=True, columns=["Price"], buffer=500, filter="AC.*",
                      regex=True, plots=["Price"]),
         ProducerSpec(title="Send", router="local",
                      attributes=[AttributeSpec("Price", "real64", "9.5"),
                                  AttributeSpec("Raw", "opaque", "de ad"),
                                  AttributeSpec("Text", "string", 'multi\nline "q" \\')],
                      rate=20.0, history=['Price: 1.0']),
         QuenchSpec(title="Q", router="local", names=["Price", "odd name"], active=True),
         RouterViewSpec(title="Stats", router="local", window=60)])


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_workspace_round_trip(fmt):
    workspace = _workspace()
    back = loads(dumps(workspace, fmt), fmt)
    assert back == workspace


def test_workspace_files(tmp_path):
    for name in ("w.json", "w.toml"):
        path = tmp_path / name
        save(_workspace(), path)
        assert load(path) == _workspace()
    assert tomllib.loads((tmp_path / "w.toml").read_text())["panes"][0]["kind"] == "consumer"


@pytest.mark.parametrize(("text", "words"), [
    ('{"panes": [{"kind": "consumer", "buffer": "x"}]}', "panes[0].buffer"),
    ('{"panes": [{"kind": "consumer", "buffer": 1}]}', "from 10"),
    ('{"panes": [{"kind": "blender"}]}', "panes[0].kind"),
    ('{"routers": [{"name": "a", "url": "nope://x"}]}', "routers[0].url"),
    ('{"routers": [{"name": "a", "url": "elvin://h"}, {"name": "a", "url": "elvin://h"}]}',
     "two routers"),
    ('{"panes": [{"kind": "producer", "attributes": [{"name": "n", "type": "int32",'
     ' "value": "x"}]}]}', "attributes[0] (n): 'x' is not a whole number"),
    ('{"routers": [{"name": "a", "url": "elvin://h", "producer_keys": ["[zz]"]}]}',
     "producer key line 1"),
    ('{"version": 9}', "version 9"),
    ("{", "not valid JSON: line 1"),
])
def test_workspace_errors_name_the_field(text, words):
    with pytest.raises(WorkspaceError) as info:
        loads(text, "json", "w.json")
    assert words in str(info.value)


def test_toml_writer_strings_survive():
    document = {"a": 'q"\\\n\t\x01é', "n": [1, 2], "t": [{"k": {"x.y": 1.0}}]}
    assert tomllib.loads(tomlwrite.dumps(document)) == document


def test_config(tmp_path):
    path = tmp_path / "console.toml"
    path.write_text('elvin = "elvin://h:1"\nbuffer = 200\nworkspace = "~/w.json"\n')
    config = load_config(path)
    assert config.elvin == "elvin://h:1" and config.buffer == 200
    assert config.workspace.endswith("/w.json") and "~" not in config.workspace
    path.write_text("buffer = true\n")
    with pytest.raises(ConfigError, match="buffer"):
        load_config(path)
    path.write_text("colour = 1\n")
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        load_config(path)
    with pytest.raises(ConfigError, match="missing.toml: no such file"):
        load_config(tmp_path / "missing.toml", must_exist=True)
    assert load_config(tmp_path / "missing.toml").buffer == 10_000


# -- small helpers -------------------------------------------------------------------------

def test_completion_helpers():
    assert word_before("Price > 1 && Sym", 16) == (13, "Sym")
    assert word_before("require(Elvin-Ro", 16) == (8, "Elvin-Ro")
    assert word_before("a == ", 5) == (5, "")
    assert escape_name("File-Path") == "File-Path"
    assert escape_name("odd name") == "odd\\ name"


def test_parse_names():
    assert parse_names('Price, Symbol  "odd name",Price') == ["Price", "Symbol", "odd name"]
    assert parse_names(" , ") == []


def test_chart_ticks_and_numbers():
    assert nice_ticks(95) == [0, 25, 50, 75, 100]
    assert nice_ticks(0) == [0, 0.25, 0.5, 0.75, 1.0]
    assert nice_ticks(9000)[-1] >= 9000
    assert format_number(12_345) == "12.3k" and format_number(2.5) == "2.5"
    assert format_number(3) == "3"


async def test_repeater_keeps_the_rate():
    sent = []

    async def send() -> None:
        sent.append(asyncio.get_running_loop().time())

    loop = asyncio.get_running_loop()
    repeater = Repeater(send, rate=200, tick=0.02)
    start = loop.time()
    repeater.start()
    async with asyncio.timeout(20):
        while len(sent) < 100:
            await asyncio.sleep(0.01)
    await repeater.stop()
    assert repeater.sent == len(sent)
    # the schedule, read from the send times (so a busy machine cannot fail it):
    # never ahead of the rate; after a stall it catches up, so the last batch
    # brings the count back to the rate (a generous margin for preemption)
    for i, when in enumerate(sent):
        assert i <= (when - start) * 200 + 1, (i, when - start)
    assert len(sent) >= (sent[-1] - start) * 200 - 40, (len(sent), sent[-1] - start)

    async def failing() -> None:
        raise ValueError("boom")

    broken = Repeater(failing, rate=10)
    broken.start()
    async with asyncio.timeout(20):
        while broken.running:
            await asyncio.sleep(0.01)
    assert str(broken.error) == "boom"
    with pytest.raises(ValueError):
        Repeater(send, rate=0)


def test_nice_range_fits_the_data():
    from elvin_apps.console.chart import nice_range
    ticks = nice_range(99.2, 101.7)
    assert ticks[0] <= 99.2 and ticks[-1] >= 101.7 and ticks[0] > 90
    assert len(nice_range(5.0, 5.0)) >= 2


def test_tick_labels_show_the_step():
    from elvin_apps.console.chart import format_tick
    assert [format_tick(v, 0.5) for v in (99.5, 100.0, 100.5)] == ["99.5", "100.0", "100.5"]
    assert format_tick(250, 250) == "250" and format_tick(0.25, 0.25) == "0.25"


def test_an_older_workspaces_bare_text_keys_keep_their_meaning(caplog):
    """Before the console followed ec's rule, bare text in a workspace was a
    string key: such a file still loads, with that meaning, and says so."""
    workspace = loads('{"routers": [{"name": "a", "url": "elvin://h", '
                      '"producer_keys": ["s3cret", "[de ad]"], '
                      '"consumer_keys": ["say \\"hi\\""]}]}', "json", "old.json")
    router = workspace.routers[0]
    assert router.producer_keys == ['"s3cret"', "[de ad]"]
    assert router.consumer_keys == ['"say \\"hi\\""']
    assert KeySpec(router.producer_keys, router.consumer_keys).raw() == (
        [b"s3cret", b"\xde\xad"], [b'say "hi"'])
    assert "bare text" in caplog.text and "old.json" in caplog.text


def test_router_ids_read_as_words():
    import time

    from elvin_apps.console.routerview import describe_router_id

    started = int(time.mktime((2026, 3, 14, 9, 5, 0, 0, 0, -1)))
    same_day = started + 3600
    assert describe_router_id(f"vm:32705:{started}:1", same_day) == \
        "vm, started 09:05 (process 32705)"
    assert describe_router_id(f"vm:32705:{started}:2", same_day + 86400 * 2) == \
        "vm, started 14 Mar 2026 09:05 (process 32705, router 2)"
    assert describe_router_id("avis@host") == "avis@host"       # another router's form
    assert describe_router_id("") == ""
