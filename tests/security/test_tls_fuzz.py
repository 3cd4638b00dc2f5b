"""Fuzz a live broker's TLS listener with mutated handshakes (issue 19; the TLS counterpart of
tests/server/test_fuzz_recorded.py for requests and test_broker_sasl.py's SASL fuzz).

One ``python -m engine serve`` with an SSL listener (``ssl.client.auth=required``: the client's
second flight carries its certificate, which the broker parses and checks). A real client --
``ssl.SSLObject`` over two ``MemoryBIO``\\s, our bytes on a plain socket -- handshakes with it in
TLS 1.2 and in TLS 1.3, and what it writes is recorded: the ClientHello (first flight) and the
Certificate / ClientKeyExchange / CertificateVerify / ChangeCipherSpec / Finished flight (second).
Each case records a fresh client's flight (fresh randoms and keys, so a second flight fits the
broker's own first answer on that connection) and, with a fixed seed (TLS_FUZZ_SEED), sends a
mutated copy instead, one case per connection:

* first flight: the ClientHello mutated;
* second flight: the client runs the handshake up to its second flight, which is mutated before
  it is sent (the broker's answer is decrypted by that client: a TLS 1.3 alert is encrypted);
* mutations: 1-4 bit flips; truncation (then our EOF); a length field -- a record's, a handshake
  message's, or, in a ClientHello, the session id's, cipher suites', compression methods',
  extensions' or one extension's -- set to 0, +-1, its maximum or a random value; repetition of a
  record, a slice or the whole flight (up to ~1 MiB); and a few foreign openings (a Kafka frame,
  HTTP, SSLv2, zeros).

Asserted for each: within BOUND seconds the broker answers with a TLS alert or closes the
connection, or -- a mutation it does not notice -- goes on with the handshake and closes within
BOUND of our EOF (never a hang); the broker lives, logs no traceback, and serves a real TLS client
(ApiVersions) on a new connection every 25 cases and at the end; its RSS (``/proc/<pid>/status``)
grows by less than 64 MiB. The outcomes are counted and printed (``-s``). The default run is
bounded to ~12 s; ``TLS_FUZZ_CASES=N`` (and ``TLS_FUZZ_SECONDS``) run more.
"""

from __future__ import annotations

import os
import random
import re
import socket
import ssl
import struct
import time
from collections import Counter

import pytest

from tests.security.certs import make_pki
from tests.serving import ServeProcess, free_port

BOUND = 3.0                     # seconds: an answer, or the close after our EOF
QUIET = 0.3                     # seconds of silence after the broker's flight: it waits for ours
SEED = int(os.environ.get("TLS_FUZZ_SEED", "20261127"))
CASES = int(os.environ.get("TLS_FUZZ_CASES", "400"))
SECONDS = float(os.environ.get("TLS_FUZZ_SECONDS", "12"))
RSS_GROWTH_KB = 64 * 1024
ALERTS = {0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 22: "record_overflow",
          40: "handshake_failure", 42: "bad_certificate", 43: "unsupported_certificate",
          46: "certificate_unknown", 47: "illegal_parameter", 48: "unknown_ca", 50: "decode_error",
          51: "decrypt_error", 70: "protocol_version", 80: "internal_error", 86: "inappropriate_fallback",
          109: "missing_extension", 110: "unsupported_extension", 116: "certificate_required"}
VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


class Broker:
    def __init__(self, directory: str):
        pki_dir = os.path.join(directory, "pki")
        os.makedirs(pki_dir)
        self.pki = make_pki(pki_dir)
        self.ssl_port = free_port()
        self.srv = ServeProcess(
            os.path.join(directory, "broker"),
            "--config", f"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{self.ssl_port}",
            "--config", "ssl.keystore.type=PEM", "--config", f"ssl.keystore.location={self.pki.path('server.pem')}",
            "--config", "ssl.truststore.type=PEM", "--config", f"ssl.truststore.location={self.pki.path('ca.pem')}",
            "--config", "listener.name.ssl.ssl.client.auth=required")

    def client(self, version: str) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(self.pki.path("ca.pem"))
        ctx.load_cert_chain(self.pki.path("client.pem"))
        ctx.minimum_version = ctx.maximum_version = VERSIONS[version]
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        return ctx.wrap_bio(incoming, outgoing, server_hostname="localhost"), incoming, outgoing

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.ssl_port), timeout=BOUND)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Broker(str(tmp_path_factory.mktemp("tls-fuzz")))
    b.srv.start()
    yield b
    _code, log = b.srv.stop()
    assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"


# -- a real client, driven by hand ----------------------------------------------------------------
def _first_flight(b: Broker, version: str, sock: socket.socket):
    """A fresh client's ClientHello sent on `sock`; returns (client, incoming BIO, hello bytes)."""
    obj, incoming, outgoing = b.client(version)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return obj, incoming, outgoing.read()


def _second_flight(b: Broker, version: str, sock: socket.socket):
    """The handshake on `sock` up to the client's second flight, which is returned unsent."""
    obj, incoming, outgoing = b.client(version)
    first = True
    while True:
        try:
            obj.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        data = outgoing.read()
        if data and not first:
            return obj, incoming, data
        if data:
            sock.sendall(data)
            first = False
        if done:
            raise AssertionError("the handshake finished without a second flight")
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("the broker closed during a valid handshake")
        incoming.write(chunk)


def _serves_a_client(b: Broker, version: str = "1.3") -> bool:
    """A full handshake and an ApiVersions v0 answered, through the SSLObject."""
    with b.connect() as s:
        obj, incoming, outgoing = b.client(version)
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                s.sendall(outgoing.read())
                chunk = s.recv(65536)
                if not chunk:
                    return False
                incoming.write(chunk)
        s.sendall(outgoing.read())
        frame = struct.pack(">hhih", 18, 0, 7, 2) + b"ok"
        obj.write(struct.pack(">i", len(frame)) + frame)
        s.sendall(outgoing.read())
        got = b""
        while len(got) < 10:
            try:
                got += obj.read(65536)
            except ssl.SSLWantReadError:
                chunk = s.recv(65536)
                if not chunk:
                    return False
                incoming.write(chunk)
        return struct.unpack_from(">ih", got, 4) == (7, 0)


# -- mutations -------------------------------------------------------------------------------------
def _records(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each whole TLS record in `data`."""
    out, i = [], 0
    while i + 5 <= len(data):
        n = struct.unpack_from(">H", data, i + 3)[0]
        out.append((i, n))
        i += 5 + n
    return out


def _length_fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of the length fields of `data`'s records and plaintext handshake messages,
    and of a ClientHello's inner vectors."""
    fields = []
    for off, n in _records(data):
        fields.append((off + 3, 2))
        if data[off] != 22 or off + 9 > len(data):
            continue
        fields.append((off + 6, 3))
        if data[off + 5] != 1:                      # ClientHello: session id, suites, ... extensions
            continue
        p = off + 9 + 2 + 32
        end = min(off + 5 + n, len(data))
        for width in (1, 2, 1):
            if p + width > end:
                break
            fields.append((p, width))
            p += width + int.from_bytes(data[p:p + width], "big")
        if p + 2 <= end:
            fields.append((p, 2))
            p += 2
            while p + 4 <= end:
                fields.append((p + 2, 2))
                p += 4 + struct.unpack_from(">H", data, p + 2)[0]
    return fields


def _mutate(rnd: random.Random, data: bytes) -> tuple[str, bytes, bool]:
    """(what was done, the bytes, whether a truncation)."""
    kind = rnd.choice(("flip", "flip", "truncate", "length", "length", "repeat"))
    if kind == "flip":
        buf = bytearray(data)
        where = []
        for _ in range(rnd.randint(1, 4)):
            i, bit = rnd.randrange(len(buf)), rnd.randrange(8)
            buf[i] ^= 1 << bit
            where.append(f"{i}.{bit}")
        return f"flip {','.join(where)}", bytes(buf), False
    if kind == "truncate":
        n = rnd.randrange(len(data))
        return f"truncate to {n}/{len(data)}", data[:n], True
    if kind == "length":
        off, width = rnd.choice(_length_fields(data))
        old = int.from_bytes(data[off:off + width], "big")
        top = (1 << (8 * width)) - 1
        new = rnd.choice((0, max(old - 1, 0), min(old + 1, top), top, rnd.randrange(top + 1)))
        return (f"length@{off}/{width} {old}->{new}",
                data[:off] + new.to_bytes(width, "big") + data[off + width:], False)
    recs = _records(data)
    how = rnd.choice(("record", "slice", "flight"))
    if how == "record" and recs:
        off, n = rnd.choice(recs)
        times = rnd.randint(2, 64)
        return f"repeat record@{off} x{times}", data[:off] + data[off:off + 5 + n] * times + data[off + 5 + n:], False
    if how == "slice":
        i = rnd.randrange(len(data))
        j = min(len(data), i + rnd.randint(1, 64))
        times = rnd.randint(2, 256)
        return f"repeat [{i}:{j}] x{times}", data[:i] + data[i:j] * times + data[j:], False
    times = rnd.choice((2, 3, 16, max(2, (1 << 20) // len(data))))
    return f"repeat flight x{times}", data * times, False


FOREIGN = [
    ("a Kafka ApiVersions frame", struct.pack(">i", 14) + struct.pack(">hhih", 18, 0, 7, 2) + b"ok"),
    ("an HTTP request", b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    ("an SSLv2 ClientHello", bytes.fromhex("802b0103010012000000100100800700c003008000000600400400800200800a4f"
                                           "b7d0c8e51d8a2f19b3a8d9e3b15a16")),
    ("64 KiB of zeros", bytes(65536)),
    ("a record header of 2^16-1 bytes then EOF", bytes([22, 3, 1, 255, 255])),
]


# -- one exchange ----------------------------------------------------------------------------------
def _answer(sock: socket.socket, deadline: float) -> tuple[bytes, str]:
    """What the broker sends until it closes ('eof' / 'reset'), or 'open': `deadline` passed, or
    it sent something and then nothing for QUIET seconds (its flight is out, it waits for ours)."""
    got = b""
    while True:
        left = deadline - time.monotonic()
        if got:
            left = min(left, QUIET)
        if left <= 0:
            return got, "open"
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return got, "open"
        except ConnectionResetError:
            return got, "reset"
        if not chunk:
            return got, "eof"
        got += chunk


def _plain_alert(data: bytes) -> str | None:
    """The first unencrypted alert record's description (an encrypted one is longer than 2)."""
    for off, n in _records(data):
        if data[off] == 21 and n == 2 and off + 7 <= len(data):
            return ALERTS.get(data[off + 6], f"alert {data[off + 6]}")
    return None


def _decrypted_alert(obj: ssl.SSLObject, incoming: ssl.MemoryBIO, data: bytes) -> str | None:
    """The alert the client's TLS stack finds in the broker's (encrypted) answer, if any."""
    incoming.write(data)
    try:
        obj.do_handshake()
        obj.read(1)
    except ssl.SSLError as e:
        m = re.search(r"ALERT_([A-Z_]+)", str(e))
        return m.group(1).lower() if m else None
    return None


def _exchange(b: Broker, flight: str, version: str, mutate) -> tuple[str, str]:
    """Send one mutated flight; (what was sent, the outcome) -- an AssertionError if the broker
    neither answered/closed within BOUND nor closed within BOUND of our EOF."""
    with b.connect() as s:
        if flight == "first":
            obj, incoming, data = _first_flight(b, version, s)
        else:
            obj, incoming, data = _second_flight(b, version, s)
        what, payload, truncated = mutate(data)
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):   # the broker closed on an early byte
            return what, "closed while sending"
        got, how = _answer(s, time.monotonic() + (QUIET if truncated else BOUND))
        alert = (_decrypted_alert(obj, incoming, got) if got else None) or _plain_alert(got)
        if how == "open":
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            more, how = _answer(s, time.monotonic() + BOUND)
            assert how != "open", f"{flight} TLS {version} {what}: no close {BOUND} s after our EOF"
            got += more
            alert = alert or _plain_alert(got)
            return what, f"alert {alert}" if alert else ("went on, closed at our EOF" if got else "closed at our EOF")
        return what, f"alert {alert}" if alert else f"closed ({how})"


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"VmRSS:\s+(\d+)", f.read())
    assert m
    return int(m.group(1))


def test_mutated_tls_handshakes(broker, capsys):
    b = broker
    assert _serves_a_client(b, "1.2") and _serves_a_client(b, "1.3")
    pid = b.srv.proc.pid
    rss0 = _rss_kb(pid)
    rnd = random.Random(SEED)
    outcomes: Counter = Counter()
    examples: dict[str, str] = {}
    for what, payload in FOREIGN:
        _w, outcome = _exchange(b, "first", "1.3", lambda _data, p=payload, w=what: (w, p, False))
        outcomes[outcome] += 1
        examples.setdefault(outcome, what)
        print(f"foreign {what}: {outcome}")
    t0 = time.monotonic()
    cases = 0
    while cases < CASES and time.monotonic() - t0 < SECONDS:
        flight, version = rnd.choice(("first", "second")), rnd.choice(("1.2", "1.3"))
        what, outcome = _exchange(b, flight, version, lambda data: _mutate(rnd, data))
        cases += 1
        key = f"{flight} {version}: {outcome}"
        outcomes[key] += 1
        examples.setdefault(key, what)
        assert b.srv.running, f"the broker died after {flight} TLS {version} {what}"
        if cases % 25 == 0:
            assert _serves_a_client(b), f"no TLS client served after {flight} TLS {version} {what}"
    rss1 = _rss_kb(pid)
    with capsys.disabled():
        print(f"\nTLS fuzz: {cases} mutated flights in {time.monotonic() - t0:.1f}s (seed {SEED}), "
              f"RSS {rss0} -> {rss1} kB")
        for key, n in sorted(outcomes.items()):
            print(f"  {n:4d}  {key}   (e.g. {examples[key]})")
    assert _serves_a_client(b, "1.2") and _serves_a_client(b, "1.3")
    log = b.srv.log_text()
    assert "Traceback" not in log, log[-4000:]
    assert " ERROR " not in log, [line for line in log.splitlines() if " ERROR " in line][:5]
    assert cases >= 50, cases
    # the broker tells the client why (OpenSSL's alert, sent before the close, as Kafka does)
    alerted = sum(n for key, n in outcomes.items() if ": alert " in key)
    assert alerted >= cases // 3, outcomes
    assert rss1 - rss0 < RSS_GROWTH_KB, (rss0, rss1)


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_refused_client_certificate_gets_the_alert(broker, version):
    """A client without a certificate (ssl.client.auth=required) and one whose certificate the
    trust store does not know learn why from the broker's alert, not from a reset."""
    b = broker
    for cert, alert in ((None, "CERTIFICATE_REQUIRED" if version == "1.3" else "HANDSHAKE_FAILURE"),
                        (b.pki.path("other-client.pem"), "UNKNOWN_CA")):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(b.pki.path("ca.pem"))
        if cert:
            ctx.load_cert_chain(cert)
        ctx.minimum_version = ctx.maximum_version = VERSIONS[version]
        with b.connect() as raw, pytest.raises(ssl.SSLError, match=f"ALERT_{alert}"):
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:   # TLS 1.3: the client is done
                frame = struct.pack(">hhih", 18, 0, 7, 2) + b"ok"          # before the broker checks
                s.sendall(struct.pack(">i", len(frame)) + frame)
                s.recv(4)
