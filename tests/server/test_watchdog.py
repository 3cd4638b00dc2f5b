"""The request watchdog (engine/server/watchdog.py): a request in flight past its bound is
logged once with its API, version, correlation id and client id, and answered as usual."""

from __future__ import annotations

import logging
import struct
import time

from engine.server.watchdog import RequestWatchdog

from .conftest import connect, recv_frame, request_frame
from .test_bad_input import fetch_v9


def test_a_request_past_its_bound_names_itself(broker, caplog):
    broker.call(lambda: broker.engine.create_topic("quiet", 1))

    def short_watchdog():      # on the broker's loop
        broker.broker.watchdog.stop()
        wd = RequestWatchdog(broker.loop, lambda: broker.broker._connections, interval=0.05,
                             default_bound_s=0.3)
        broker.broker.watchdog = wd
        wd.start()
        return wd
    wd = broker.call(short_watchdog)
    caplog.set_level(logging.INFO, logger="engine.server")
    with connect(broker.port, timeout=10) as s:
        # a long poll on an empty partition: in flight for its max_wait_ms (1.5 s)
        t0 = time.monotonic()
        s.sendall(request_frame(1, 9, 4242, fetch_v9("quiet", 0, 0, max_wait_ms=1500),
                                client_id=b"silent-client"))
        resp = recv_frame(s)
        waited = time.monotonic() - t0
        # a quick request afterwards is not reported
        s.sendall(request_frame(18, 0, 4243, b""))
        assert struct.unpack_from(">i", recv_frame(s))[0] == 4243
    assert struct.unpack_from(">i", resp)[0] == 4242        # still answered, in full
    assert waited >= 1.0
    reports = [r.getMessage() for r in caplog.records if "past its" in r.getMessage()]
    assert len(reports) == 1, reports                        # once per request
    assert "Fetch v9" in reports[0] and "correlation id 4242" in reports[0] \
        and "'silent-client'" in reports[0], reports[0]
    assert any("answered after" in r.getMessage() and "4242" in r.getMessage() for r in caplog.records)
    assert broker.call(lambda: wd.reported) == 1


def test_join_group_gets_the_rebalance_timeout_on_top():
    import asyncio

    from engine.protocol import messages as m
    wd = RequestWatchdog(asyncio.new_event_loop(), lambda: [], default_bound_s=30.0)
    assert wd.bound_s(m.ApiKey.FETCH) == 30.0
    assert wd.bound_s(m.ApiKey.JOIN_GROUP) == 330.0
    wd.loop.close()
