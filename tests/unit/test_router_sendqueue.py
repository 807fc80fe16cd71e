"""The bounded send queue and its drop policies, with a fake transport."""

from elvin.router.sendqueue import DROP_WARN, SendQueue


class FakeLoop:
    def __init__(self):
        self.callbacks = []

    def call_soon(self, fn, *args):
        self.callbacks.append((fn, args))

    def run(self):
        while self.callbacks:
            fn, args = self.callbacks.pop(0)
            fn(*args)


class FakeTransport:
    def __init__(self):
        self.written = []
        self.buffer = 0
        self.reading = True

    def write(self, data):
        self.written.append(bytes(data))

    def get_write_buffer_size(self):
        return self.buffer

    def pause_reading(self):
        self.reading = False

    def resume_reading(self):
        self.reading = True


def make(policy, max_bytes=100):
    loop, transport = FakeLoop(), FakeTransport()
    drops = []
    queue = SendQueue(transport, loop, max_bytes, policy, on_drop=drops.append,
                      on_backpressure=lambda on: None)
    queue.on_backpressure = lambda on: (transport.pause_reading() if on
                                        else transport.resume_reading())
    return queue, loop, transport, drops


def packet(tag, size=20):
    return tag.encode() * size


def written_items(transport):
    """Split what was written back into the pushed items (all 20 bytes or DropWarn)."""
    data = b"".join(transport.written)
    out = []
    while data:
        if data.startswith(DROP_WARN):
            out.append("W")
            data = data[len(DROP_WARN):]
        else:
            out.append(chr(data[0]))
            data = data[20:]
    return out


def test_writes_are_batched_per_loop_iteration():
    queue, loop, transport, _ = make("oldest", 10_000)
    for tag in "abc":
        queue.push(packet(tag), True)
    assert transport.written == []
    loop.run()
    assert len(transport.written) == 1 and written_items(transport) == ["a", "b", "c"]


def test_oldest_policy_drops_head_and_warns_there():
    queue, loop, transport, drops = make("oldest", 100)
    queue.pause_writing()
    for tag in "abcdefg":
        queue.push(packet(tag), True)
    assert queue.bytes <= 100
    queue.resume_writing()
    items = written_items(transport)
    assert items[0] == "W" and items[-1] == "g"
    assert "a" not in items and sum(drops) == queue.dropped > 0


def test_newest_policy_drops_incoming():
    queue, loop, transport, _ = make("newest", 100)
    queue.pause_writing()
    for tag in "abcdefg":
        queue.push(packet(tag), True)
    queue.resume_writing()
    assert written_items(transport) == ["a", "b", "c", "d", "e", "W"]


def test_largest_policy_drops_largest():
    queue, loop, transport, _ = make("largest", 100)
    queue.pause_writing()
    queue.push(b"L" * 60, True)
    queue.push(packet("a"), True)
    queue.push(packet("b"), True)   # 100 bytes: fits
    queue.push(packet("c"), True)   # over: the 60-byte packet goes
    queue.resume_writing()
    data = b"".join(transport.written)
    assert b"L" not in data and DROP_WARN in data
    assert b"a" * 20 in data and b"c" * 20 in data


def test_replies_are_never_dropped_and_reading_pauses():
    queue, loop, transport, _ = make("oldest", 100)
    queue.pause_writing()
    for _ in range(10):
        queue.push(packet("r"), False)
    assert queue.dropped == 0 and queue.bytes == 200
    assert transport.reading is False       # backpressure on the client's requests
    queue.resume_writing()
    assert written_items(transport) == ["r"] * 10
    assert transport.reading is True


def test_none_policy_closes_on_overflow():
    closed = []
    loop, transport = FakeLoop(), FakeTransport()
    queue = SendQueue(transport, loop, 100, "none", on_overflow=lambda: closed.append(1))
    queue.pause_writing()
    for tag in "abcdef":
        queue.push(packet(tag), True)
    assert closed == [1] and queue.closed and queue.bytes == 0


def test_conf_conn_only_when_idle():
    queue, loop, transport, _ = make("oldest", 1000)
    assert queue.push_conf_conn(b"CONF")
    assert not queue.push_conf_conn(b"CONF")     # something is queued now
    loop.run()
    transport.buffer = 10
    assert not queue.push_conf_conn(b"CONF")     # transport still has data
