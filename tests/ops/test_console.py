"""The web console in a real headless browser (Debian's chromium + chromium-driver via selenium).

A broker (`serve --console-listen`) gets records from confluent-kafka, including a value
``<script>...</script>``; each page is opened in chromium, its text checked (the topic and the
record it was given, the script shown as text and not run) and a screenshot saved under the
test's tmp dir and checked (a PNG of the window's size that is not blank).  Also: the produce
form appends a record a consumer then reads, every other POST is 405, a page is bounded, and
``python -m engine console --bootstrap-server`` serves the same pages over the wire.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib

import pytest

from tests.serving import ROOT, ServeProcess, free_port

ck = pytest.importorskip("confluent_kafka")

TOPIC = "console-demo"
GROUP = "console-group"
SCRIPT = "<script>window.pwned=1;document.title='pwned'</script>"
W, H = 1200, 900


def _chromium():
    for browser in ("chromium", "chromium-browser", "google-chrome"):
        b = shutil.which(browser)
        if b:
            return b, shutil.which("chromedriver")
    return None, None


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (test extra)")
    binary, driver_path = _chromium()
    if not binary or not driver_path:
        pytest.skip("no headless browser: install Debian's chromium and chromium-driver "
                    "(apt-get install -y chromium chromium-driver) to run the console browser tests")
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={W},{H}", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(driver_path), options=opts)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    cport = free_port()
    srv = ServeProcess(tmp_path_factory.mktemp("console"), "--config", "num.partitions=1",
                       "--config", "group.initial.rebalance.delay.ms=0",
                       "--console-listen", f"127.0.0.1:{cport}").start()
    srv.console = f"http://127.0.0.1:{cport}"
    p = ck.Producer({"bootstrap.servers": srv.bootstrap, "linger.ms": 0})
    p.produce(TOPIC, key=b"user-1", value=json.dumps({"name": "Ada", "n": 1}).encode(),
              headers=[("trace-id", b"abc123")])
    p.produce(TOPIC, key=b"user-2", value=SCRIPT.encode())
    p.produce(TOPIC, key=b"bin", value=bytes([0, 1, 2, 255]))
    for i in range(150):
        p.produce("bulk", value=b"r%d" % i)
    assert p.flush(30) == 0
    c = ck.Consumer({"bootstrap.servers": srv.bootstrap, "group.id": GROUP,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([TOPIC])
    msg, deadline = None, time.monotonic() + 30
    while msg is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            msg = m
    assert msg is not None and msg.offset() == 0
    c.commit(message=msg, asynchronous=False)     # committed 1 of 3: lag 2
    srv.consumer = c                              # stays a member while the pages are viewed
    yield srv
    c.close()
    srv.stop()


def check_png(path: str) -> None:
    """A PNG of the browser window's size whose pixels are not all one color."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (W, H) or (width >= W // 2 and height >= H // 2), (width, height)
    idat, pos = b"", 8
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    pixels = zlib.decompress(idat)
    assert len(set(pixels[::7])) > 20, "the screenshot is blank"


def visit(browser, url: str, shot: str) -> str:
    browser.get(url)
    text = browser.find_element("tag name", "body").text
    browser.save_screenshot(shot)
    check_png(shot)
    return text


def test_overview_page(browser, broker, tmp_path):
    deadline = time.monotonic() + 20
    while True:      # the charts show sampled values: wait for a sample taken after the produce
        text = visit(browser, broker.console + "/", str(tmp_path / "overview.png"))
        line = [t for t in text.splitlines() if t.startswith("kafka_server_brokertopicmetrics_messagesin_total:")]
        if line and line[0].split(":")[1].strip() == "153" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert TOPIC in text and "bulk" in text and GROUP in text
    assert line == ["kafka_server_brokertopicmetrics_messagesin_total: 153"], text
    assert "kafka_network_requestmetrics_requests_total" in text
    assert browser.find_elements("css selector", "svg polyline")


def test_topic_page(browser, broker, tmp_path):
    text = visit(browser, f"{broker.console}/topics/{TOPIC}", str(tmp_path / "topic.png"))
    assert f"Topic {TOPIC}" in text
    rows = browser.find_elements("css selector", "table")[0].find_elements("tag name", "tr")
    cells = [c.text for c in rows[1].find_elements("tag name", "td")]
    # partition, leader, replicas, ISR (one node: node 0 everywhere), log start, HW, LEO, bytes, segments
    assert cells[:7] == ["0", "0", "0", "0", "0", "3", "3"] and int(cells[7]) > 0 and cells[8] == "1", cells
    assert "retention.ms" in text and "604800000" in text


def test_message_browser_escapes_and_formats(browser, broker, tmp_path):
    text = visit(browser, f"{broker.console}/browse?topic={TOPIC}&partition=0&format=json",
                 str(tmp_path / "browse-json.png"))
    assert '"name": "Ada"' in text and "user-1" in text and "trace-id" in text and "abc123" in text
    assert SCRIPT in text                            # shown as text ...
    assert browser.execute_script("return window.pwned") is None     # ... and never run
    assert "pwned" not in browser.title
    text = visit(browser, f"{broker.console}/browse?topic={TOPIC}&partition=0&offset=1&format=hex",
                 str(tmp_path / "browse-hex.png"))
    assert "3c 73 63 72 69 70 74 3e" in text and "00 01 02 ff" in text and "user-1" not in text
    text = visit(browser, f"{broker.console}/browse?topic={TOPIC}&partition=0&offset=2",
                 str(tmp_path / "browse-binary.png"))
    assert "(not UTF-8) 00 01 02 ff" in text


def test_group_page_shows_members_and_lag(browser, broker, tmp_path):
    text = visit(browser, f"{broker.console}/groups/{GROUP}", str(tmp_path / "group.png"))
    assert f"Group {GROUP}" in text and "total lag 2" in text
    assert "rdkafka" in text                         # the member's client id
    assert f"{TOPIC}-0" in text


def test_charts_page(browser, broker, tmp_path):
    text = visit(browser, broker.console + "/charts", str(tmp_path / "charts.png"))
    assert "kafka_server_brokertopicmetrics_bytesin_total" in text
    assert len(browser.find_elements("css selector", "svg")) >= 3


def test_produce_form_appends_a_record_a_consumer_reads(browser, broker, tmp_path):
    browser.get(f"{broker.console}/topics/{TOPIC}")
    browser.find_element("id", "produce-key").send_keys("form-key")
    browser.find_element("id", "produce-value").send_keys("from the form <b>bold</b>")
    browser.find_element("name", "headers").send_keys("origin=console")
    browser.find_element("id", "produce-submit").click()
    # the POST answers 303 to the record's /browse page: wait for that page. Reading the body at
    # once caught the old page's element as it went stale in one full run; waiting for staleness
    # made chromedriver fail with "Node with given id does not belong to the document" in another,
    # so every driver error while the page changes is retried until the deadline.
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def browse_page_text(driver):
        if "/browse" not in driver.current_url:
            return None
        return driver.find_element("tag name", "body").text or None
    text = WebDriverWait(browser, 20, ignored_exceptions=(WebDriverException,)).until(browse_page_text)
    browser.save_screenshot(str(tmp_path / "produced.png"))
    check_png(str(tmp_path / "produced.png"))
    assert "from the form <b>bold</b>" in text and "origin" in text
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader",
                     "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(TOPIC, 0, 3)])
    m, deadline = None, time.monotonic() + 20
    while m is None and time.monotonic() < deadline:
        got = c.poll(0.5)
        if got is not None and not got.error():
            m = got
    c.close()
    assert m is not None and m.offset() == 3
    assert (m.key(), m.value(), m.headers()) == (b"form-key", b"from the form <b>bold</b>",
                                                 [("origin", b"console")])


def _status(url: str, method: str = "GET", data: bytes | None = None) -> int:
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_read_only_and_bounded(broker):
    base = broker.console
    for path in ("/", "/api/topics", f"/topics/{TOPIC}", "/browse"):
        assert _status(base + path, "POST", b"x=1") == 405, path
    assert _status(base + "/api/topics", "PUT", b"x") == 405
    assert _status(base + "/api/topics", "DELETE") == 405
    # the produce form without its token (another site posting it) is refused
    assert _status(base + "/produce", "POST", f"topic={TOPIC}&value=x".encode()) == 403
    assert _status(base + "/nope") == 404 and _status(base + "/groups/no-such-group") == 404
    assert _status(base + "/browse?topic=no-such-topic") == 404
    assert _status(base + f"/browse?topic={TOPIC}&offset=x") == 400
    with urllib.request.urlopen(base + "/api/records?topic=bulk&limit=100000", timeout=10) as r:
        page = json.load(r)
    assert len(page["records"]) == 100 and page["high_watermark"] == 150
    assert [x["value"] for x in page["records"][:2]] == ["r0", "r1"]
    # by timestamp: the first record at or after it; one past the newest: an empty page at the end
    with urllib.request.urlopen(base + f"/api/records?topic={TOPIC}&timestamp=0&limit=1", timeout=10) as r:
        first = json.load(r)
    assert first["offset"] == 0 and [x["key"] for x in first["records"]] == ["user-1"]
    ts = first["records"][0]["timestamp"]
    with urllib.request.urlopen(base + f"/api/records?topic={TOPIC}&timestamp={ts}&format=hex", timeout=10) as r:
        same = json.load(r)
    assert same["offset"] == 0 and same["records"][0]["key"] == b"user-1".hex(" ")
    far = 4102444800000           # 2100-01-01
    with urllib.request.urlopen(base + f"/api/records?topic={TOPIC}&timestamp={far}", timeout=10) as r:
        late = json.load(r)
    assert late["records"] == [] and late["offset"] == late["high_watermark"]


def test_standalone_console_over_the_wire(browser, broker, tmp_path):
    port = free_port()
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "engine", "console", "--bootstrap-server",
                             broker.bootstrap, "--listen", f"127.0.0.1:{port}"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while _status_or_none(base + "/api/groups") != 200:
            assert time.monotonic() < deadline and proc.poll() is None, "the console did not start"
            time.sleep(0.3)
        text = visit(browser, f"{base}/browse?topic={TOPIC}&partition=0", str(tmp_path / "wire-browse.png"))
        assert '{"name": "Ada", "n": 1}' in text and SCRIPT in text
        assert browser.execute_script("return window.pwned") is None
        text = visit(browser, f"{base}/groups/{GROUP}", str(tmp_path / "wire-group.png"))
        assert "total lag" in text and f"{TOPIC}-0" in text
        with urllib.request.urlopen(f"{base}/api/topics/{TOPIC}", timeout=10) as r:
            t = json.load(r)
        assert t["partitions"][0]["log_start_offset"] == 0 and t["partitions"][0]["high_watermark"] >= 3
        p0 = t["partitions"][0]
        assert (p0["leader"], p0["replicas"], p0["isr"]) == (0, [0], [0])
        assert t["config"]["cleanup.policy"] == "delete"
    finally:
        proc.terminate()
        proc.wait(10)


def _status_or_none(url: str):
    try:
        return _status(url)
    except OSError:
        return None


def test_standalone_console_names_an_unreachable_broker():
    port = free_port()
    r = subprocess.run([sys.executable, "-m", "engine", "console", "--bootstrap-server",
                        f"127.0.0.1:{port}", "--listen", "127.0.0.1:0"], cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"error: no bootstrap broker answered: cannot connect to 127.0.0.1:{port}: [Errno 111] Connection refused"]
