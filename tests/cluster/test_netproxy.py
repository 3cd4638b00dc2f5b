"""engine/chaos/netproxy.py's LinkProxy with plain sockets against an echo server: pass,
blackhole (silence, no close, held bytes delivered on heal), reset (RST on open and new
connections), delay (each way), drop-responses (requests arrive, answers do not; reset at the
heal), and switching back."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from engine.chaos.netproxy import LinkProxy


class Echo:
    """A threaded TCP echo server on 127.0.0.1 counting the connections it accepted."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.received = 0                          # bytes, over every connection
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(c,), daemon=True).start()

    def _echo(self, c):
        with c:
            try:
                while data := c.recv(65536):
                    self.received += len(data)
                    c.sendall(data)
            except OSError:
                pass

    def close(self):
        self.sock.close()


@pytest.fixture
def link():
    echo = Echo()
    proxy = LinkProxy("127.0.0.1", echo.port).start()
    yield proxy, echo
    proxy.close()
    echo.close()


def _conn(proxy, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)
    return s


def _roundtrip(s, payload=b"ping") -> bytes:
    s.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_pass_forwards_both_ways(link):
    proxy, echo = link
    with _conn(proxy) as s:
        assert _roundtrip(s, b"hello") == b"hello"
        big = bytes(range(256)) * 4000           # ~1 MB: several chunks, in order
        s.sendall(big)
        got = b""
        while len(got) < len(big):
            got += s.recv(1 << 20)
        assert got == big
    assert echo.accepted == 1


def test_blackhole_is_silence_not_a_close_and_heals(link):
    proxy, echo = link
    with _conn(proxy) as s:
        assert _roundtrip(s) == b"ping"
        proxy.set("blackhole")
        s.sendall(b"held")
        s.settimeout(1.0)
        with pytest.raises(socket.timeout):      # silence: no answer, no EOF, no reset
            s.recv(100)
        # a new connection is accepted (the client sees a connected socket) but goes nowhere
        with _conn(proxy) as s2:
            s2.sendall(b"x")
            s2.settimeout(0.5)
            with pytest.raises(socket.timeout):
                s2.recv(100)
        accepted = echo.accepted
        proxy.set("pass")
        s.settimeout(5.0)
        assert s.recv(100) == b"held"            # what was sent during the blackhole arrives
        assert _roundtrip(s, b"again") == b"again"
    time.sleep(0.2)
    assert echo.accepted == accepted == 1        # s2 closed before the heal: never reached the target


def test_reset_sends_rst_and_refuses_new_connections(link):
    proxy, _ = link
    s = _conn(proxy)
    assert _roundtrip(s) == b"ping"
    proxy.set("reset")
    with pytest.raises(ConnectionResetError):
        s.sendall(b"x")
        s.recv(100)
    s.close()
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        s2 = _conn(proxy)
        time.sleep(0.1)
        s2.sendall(b"x")
        s2.recv(100)
    proxy.set("pass")
    with _conn(proxy) as s3:
        assert _roundtrip(s3) == b"ping"


def test_reset_during_blackhole_closes_held_connections(link):
    proxy, _ = link
    s = _conn(proxy)
    proxy.set("blackhole")
    s.sendall(b"x")
    time.sleep(0.1)
    proxy.set("reset")
    with pytest.raises(ConnectionResetError):
        s.recv(100)
    s.close()


def test_delay_each_way(link):
    proxy, _ = link
    with _conn(proxy) as s:
        t0 = time.monotonic()
        assert _roundtrip(s) == b"ping"
        fast = time.monotonic() - t0
        proxy.set("delay", delay_ms=150)
        t0 = time.monotonic()
        assert _roundtrip(s) == b"ping"
        slow = time.monotonic() - t0
        assert fast < 0.1
        assert 0.29 <= slow < 1.5                # 150 ms to the target and 150 ms back
        proxy.set("pass")
        t0 = time.monotonic()
        assert _roundtrip(s) == b"ping"
        assert time.monotonic() - t0 < 0.1


def test_bad_modes_refused(link):
    proxy, _ = link
    with pytest.raises(ValueError):
        proxy.set("drop-everything")
    with pytest.raises(ValueError):
        proxy.set("delay")


def _request(client_id: bytes, body: bytes = b"") -> bytes:
    """A Kafka request frame: size, api_key 18 (ApiVersions), version 0, correlation id 1,
    the client id (int16 length), then `body`."""
    import struct
    head = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id + body
    return struct.pack(">i", len(head)) + head


def test_rules_by_client_id_cut_only_that_client():
    echo = Echo()
    proxy = LinkProxy("127.0.0.1", echo.port, kafka=True).start()
    try:
        fetcher, client = _conn(proxy), _conn(proxy)
        assert _roundtrip(fetcher, _request(b"replica-2")) == _request(b"replica-2")
        proxy.rule("replica-2", "blackhole")
        proxy.rule("replica-", "reset")               # the longest prefix wins for replica-2
        req = _request(b"rdkafka", b"x" * 10)
        client.sendall(req[:9])                       # a header split over two sends: passes
        time.sleep(0.05)
        client.sendall(req[9:])
        got = b""
        while len(got) < len(req):
            got += client.recv(100)
        assert got == req
        fetcher.sendall(b"held")
        fetcher.settimeout(0.5)
        with pytest.raises(socket.timeout):
            fetcher.recv(100)
        # a connection opened under the rule is held from its very first request
        late = _conn(proxy)
        late.sendall(_request(b"replica-2"))
        late.settimeout(0.5)
        with pytest.raises(socket.timeout):
            late.recv(100)
        other = _conn(proxy)                          # replica-3: the shorter rule, reset
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            other.sendall(_request(b"replica-3"))
            other.recv(100)
        proxy.rule("replica-", None)
        proxy.clear_rules()
        fetcher.settimeout(5.0)
        assert fetcher.recv(100) == b"held"
        late.settimeout(5.0)
        assert late.recv(100) == _request(b"replica-2")
        with pytest.raises(ValueError):
            LinkProxy("127.0.0.1", echo.port).rule("x", "pass")
    finally:
        proxy.close()
        echo.close()


def _wait(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_drop_responses_requests_arrive_answers_do_not(link):
    proxy, echo = link
    with _conn(proxy) as s, _conn(proxy) as idle:
        assert _roundtrip(s) == b"ping"
        assert _roundtrip(idle, b"idle") == b"idle"
        proxy.set("drop-responses")
        s.sendall(b"lost-ack")
        _wait(lambda: echo.received == 4 + 4 + 8)  # the target got the request and answered it
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):      # silence towards the client: no answer, no EOF
            s.recv(100)
        # a new connection reaches the target; its answers are dropped too
        late = _conn(proxy)
        late.sendall(b"late")
        _wait(lambda: echo.received == 4 + 4 + 8 + 4 and echo.accepted == 3)
        late.settimeout(0.5)
        with pytest.raises(socket.timeout):
            late.recv(100)
        proxy.set("pass")
        # the connections whose answers were dropped are reset at the heal (what was dropped stays
        # dropped; a response cut mid-frame must not reach the client); the idle one goes on
        for c in (s, late):
            c.settimeout(5.0)
            with pytest.raises(ConnectionResetError):
                c.recv(100)
        late.close()
        assert _roundtrip(idle, b"still") == b"still"
    with _conn(proxy) as s2:
        assert _roundtrip(s2) == b"ping"


class Answer(Echo):
    """A server answering each Kafka request frame with an empty response frame of its
    correlation id (size 4, correlation id); requests of an API key in `silent` get no answer
    (Produce with acks=0)."""

    def __init__(self, silent: frozenset[int] = frozenset()):
        self.silent = silent
        super().__init__()

    def _echo(self, c):
        import struct
        with c:
            buf = b""
            try:
                while data := c.recv(65536):
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + (n := struct.unpack_from(">i", buf)[0]):
                        key, corr = struct.unpack_from(">h", buf, 4)[0], struct.unpack_from(">i", buf, 8)[0]
                        buf = buf[4 + n:]
                        self.received += 1
                        if key not in self.silent:
                            c.sendall(struct.pack(">ii", 4, corr))
            except OSError:
                pass


def test_drop_responses_counts_dropped_answers_by_api_key():
    import struct
    answer = Answer()
    proxy = LinkProxy("127.0.0.1", answer.port, kafka=True).start()

    def req(api_key, corr):
        head = struct.pack(">hhih", api_key, 9, corr, 7) + b"rdkafka" + b"x" * 20
        return struct.pack(">i", len(head)) + head
    try:
        with _conn(proxy) as s:
            s.sendall(req(18, 1))
            assert s.recv(100) == struct.pack(">ii", 4, 1)
            proxy.set("drop-responses")
            s.sendall(req(0, 2) + req(0, 3) + req(3, 4))
            _wait(lambda: answer.received == 4)
            _wait(lambda: sum(proxy.dropped.values()) == 3)
            assert proxy.dropped == {0: 2, 3: 1}   # two Produce answers, one Metadata answer lost
    finally:
        proxy.close()
        answer.close()


def test_unanswered_acks0_requests_are_not_remembered_for_ever():
    """A long acks=0 Produce stream: the proxy's table of requests awaiting an answer stays
    bounded, and a later answer is still counted under its own API key."""
    import struct

    from engine.chaos.netproxy import MAX_AWAITED
    answer = Answer(silent=frozenset({0}))
    proxy = LinkProxy("127.0.0.1", answer.port, kafka=True).start()

    def req(api_key, corr):
        head = struct.pack(">hhih", api_key, 9, corr, 7) + b"rdkafka" + b"x" * 20
        return struct.pack(">i", len(head)) + head
    n = 3 * MAX_AWAITED
    try:
        with _conn(proxy) as s:
            s.sendall(b"".join(req(0, corr) for corr in range(1, n + 1)))
            _wait(lambda: answer.received == n)
            (link,) = proxy._links
            assert len(link.api_of) <= MAX_AWAITED
            proxy.set("drop-responses")
            s.sendall(req(3, n + 1))
            _wait(lambda: sum(proxy.dropped.values()) == 1)
            assert proxy.dropped == {3: 1}
            assert len(link.api_of) == 0      # (the acks=0 ones before the answered one: gone)
    finally:
        proxy.close()
        answer.close()
