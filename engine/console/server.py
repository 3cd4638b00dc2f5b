"""The web console: server-rendered HTML pages and a small JSON API over one HTTP server.

Why stdlib ``http.server`` in a thread rather than asyncio on the broker's loop: every page
does blocking work — segment reads, a wait on the group coordinator (which itself runs on the
broker's loop: asking it from that loop would deadlock), a produce that waits for its append —
and the same server must also run standalone (``python -m engine console``) with a blocking
wire client.  A ``ThreadingHTTPServer`` keeps all of that off the broker's event loop at the
price of a thread per page view, which is nothing at an operator's request rate.

Bad input: every page is read-only except ``POST /produce`` (which also needs the form's token,
so another site cannot post it); every other POST, PUT, DELETE is 405.  Everything shown is
escaped (:func:`html.escape`); a record value ``<script>`` is shown as text.  A page reads at most
``MAX_RECORDS`` records and about ``MAX_READ_BYTES`` of log, and shows at most ``SHOW_BYTES`` of
each key/value.  Charts are inline SVG drawn from values sampled every few seconds.
"""

from __future__ import annotations

import collections
import json
import logging
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from ..server.metrics import http_server
from . import pages
from .sources import MAX_RECORDS

__all__ = ["ConsoleServer"]

log = logging.getLogger("engine.console")

MAX_FORM_BYTES = 1 << 20


class _NotFound(Exception):
    pass


class ConsoleServer:
    """The console on host:port (port 0: any free one), serving from `source`."""

    def __init__(self, source, host: str = "127.0.0.1", port: int = 0, *, sample_every: float = 2.0,
                 security=None):
        self.source = source
        self.security = security          # engine/server/http_security.py: HTTPS, basic auth
        self.token = secrets.token_urlsafe(16)
        self.samples: collections.deque = collections.deque(maxlen=90)
        self.sample_every = sample_every
        self.httpd = http_server(host, port, _Handler, security, console=self)
        self.host = host
        self.port = self.httpd.server_address[1]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self.httpd.serve_forever, name="console-http", daemon=True),
                         threading.Thread(target=self._sampler, name="console-sampler", daemon=True)]

    def start(self) -> ConsoleServer:
        for t in self._threads:
            t.start()
        log.info("console on %s://%s:%d/", "https" if self.httpd.ssl_context else "http", self.host, self.port)
        return self

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _sampler(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.time(), self.source.sample()))
            except Exception as e:           # a sample is best effort; pages still work
                log.debug("console sample failed: %s", e)
            self._stop.wait(self.sample_every)

    def series(self) -> dict[str, list[tuple[float, float]]]:
        out: dict[str, list] = {}
        for t, values in list(self.samples):
            for name, v in values.items():
                out.setdefault(name, []).append((t, v))
        return out


def _int_arg(q: dict, name: str, default=None, lo: int | None = None):
    v = q.get(name, [""])[0].strip()
    if v == "":
        return default
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {v!r}") from None
    if lo is not None and n < lo:
        raise ValueError(f"{name} must be >= {lo}")
    return n


class _Handler(BaseHTTPRequestHandler):
    server_version = "kafka-engine-console"
    console: ConsoleServer
    principal = "User:ANONYMOUS"

    def _login(self) -> bool:
        """With basic auth configured: the caller's principal, or False after a 401."""
        security = self.console.security
        if security is None:
            return True
        principal = security.principal(self)
        if principal is None:
            return False
        self.principal = principal
        return True

    # -- routing -----------------------------------------------------------------
    def do_GET(self):
        if not self._login():
            return
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        src = self.console.source
        try:
            if parts and parts[0] == "api":
                return self._json(self._api(parts[1:], q))
            if not parts:
                return self._html(pages.overview(src.name, src.topics(), src.groups(), self.console.series()))
            if parts[0] == "topics" and len(parts) == 2:
                return self._html(pages.topic(src.name, src.topic(parts[1]), self.console.token))
            if parts[0] == "groups" and len(parts) == 2:
                return self._html(pages.group(src.name, self._group(parts[1])))
            if parts == ["browse"]:
                topic, partition, kw, fmt = self._browse_args(q)
                data = src.records(topic, partition, **kw)
                return self._html(pages.browse(src.name, topic, partition, data, fmt, kw.get("limit", 20)))
            if parts == ["charts"]:
                return self._html(pages.charts(src.name, self.console.series()))
            raise _NotFound(url.path)
        except _NotFound:
            self._error(404, "not found")
        except (KeyError, LookupError) as e:
            self._error(404, f"not found: {e}")
        except ValueError as e:
            self._error(400, str(e))
        except Exception as e:
            log.exception("console page %s failed", self.path)
            self._error(500, f"{type(e).__name__}: {e}")

    def _group(self, group_id: str) -> dict:
        g = self.console.source.group(group_id)
        if g["state"] == "Dead" and not g["members"] and not g["offsets"]:
            raise LookupError(f"consumer group {group_id!r} does not exist")   # as kafka-consumer-groups
        return g

    def _browse_args(self, q: dict):
        topic = q.get("topic", [""])[0]
        if not topic:
            raise ValueError("topic is required")
        partition = _int_arg(q, "partition", 0, 0)
        limit = min(_int_arg(q, "limit", 20, 1), MAX_RECORDS)
        kw = {"limit": limit, "offset": _int_arg(q, "offset", None, 0),
              "timestamp": _int_arg(q, "timestamp", None, 0)}
        fmt = q.get("format", ["text"])[0]
        if fmt not in pages.FORMATS:
            raise ValueError(f"format must be one of {', '.join(pages.FORMATS)}")
        return topic, partition, kw, fmt

    def _api(self, parts: list, q: dict):
        src = self.console.source
        if parts == ["topics"]:
            return src.topics()
        if len(parts) == 2 and parts[0] == "topics":
            return src.topic(parts[1])
        if parts == ["groups"]:
            return [{"group_id": g, "protocol_type": t, "state": s} for g, t, s in src.groups()]
        if len(parts) == 2 and parts[0] == "groups":
            return self._group(parts[1])
        if parts == ["records"]:
            topic, partition, kw, fmt = self._browse_args(q)
            data = src.records(topic, partition, **kw)
            data["records"] = [pages.record_dict(r, fmt) for r in data["records"]]
            return data
        if parts == ["metrics"]:
            return {k: [[t, v] for t, v in s] for k, s in self.console.series().items()}
        raise _NotFound("/api/" + "/".join(parts))

    def do_POST(self):
        if not self._login():
            return
        url = urllib.parse.urlsplit(self.path)
        if url.path != "/produce":
            return self._refuse()
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if not 0 <= n <= MAX_FORM_BYTES:
            return self._error(413, f"the form must be at most {MAX_FORM_BYTES} bytes")
        form = urllib.parse.parse_qs(self.rfile.read(n).decode("utf-8", "replace"), keep_blank_values=True)
        if not secrets.compare_digest(form.get("token", [""])[0], self.console.token):
            return self._error(403, "the produce form's token is missing or stale: reload the topic page")
        try:
            topic = form.get("topic", [""])[0]
            partition = _int_arg(form, "partition", 0, 0)
            key = form.get("key", [""])[0]
            value = form.get("value", [""])[0]
            security = self.console.security
            if security is not None and not security.may_write(self.principal, self.client_address, topic):
                return self._error(403, f"{self.principal} may not write to topic {topic!r} "
                                        "(TOPIC_AUTHORIZATION_FAILED)")
            headers = []
            for line in form.get("headers", [""])[0].splitlines():
                if line.strip():
                    k, _, v = line.partition("=")
                    headers.append((k.strip(), v.encode()))
            off = self.console.source.produce(topic, partition, key.encode() if key else None,
                                              value.encode(), headers)
        except ValueError as e:
            return self._error(400, str(e))
        except Exception as e:
            log.info("console produce failed: %s", e)
            return self._error(400, f"{type(e).__name__}: {e}")
        where = "/browse?" + urllib.parse.urlencode({"topic": topic, "partition": partition, "offset": off})
        self.send_response(303)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _refuse(self):
        self.send_response(405)
        self.send_header("Allow", "GET, HEAD" + (", POST" if self.path.startswith("/produce") else ""))
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_PUT = do_DELETE = do_PATCH = _refuse

    # -- replies ---------------------------------------------------------------------
    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; "
                         "img-src 'self' data:; form-action 'self'")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _html(self, text: str) -> None:
        self._send(200, text.encode(), "text/html; charset=utf-8")

    def _json(self, obj) -> None:
        self._send(200, json.dumps(obj, default=str).encode(), "application/json")

    def _error(self, code: int, message: str) -> None:
        self._send(code, pages.error(code, message).encode(), "text/html; charset=utf-8")

    def log_message(self, fmt, *args):
        log.debug("console %s: " + fmt, self.client_address[0], *args)
