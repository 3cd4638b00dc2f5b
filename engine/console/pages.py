"""HTML of the console's pages.  Every value from the data goes through :func:`e` (html.escape)."""

from __future__ import annotations

import datetime
import html
import json
import urllib.parse

__all__ = ["FORMATS", "SHOW_BYTES", "overview", "topic", "group", "browse", "charts", "error",
           "record_dict"]

FORMATS = ("text", "json", "hex")
SHOW_BYTES = 4096          # of each key and value


def e(v) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def q(**kw) -> str:
    return e(urllib.parse.urlencode(kw))


_STYLE = """
body{font-family:sans-serif;margin:1em 2em;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top;font-size:90%}
th{background:#eee} pre{margin:0;white-space:pre-wrap;word-break:break-all;max-width:60em}
nav a{margin-right:1em} .chart{display:inline-block;margin:0 1em 1em 0} .muted{color:#888}
"""


def _page(title: str, source: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)} - kafka-engine</title>"
            f"<style>{_STYLE}</style></head><body>"
            f"<nav><a href='/'>Overview</a><a href='/charts'>Metrics</a>"
            f"<span class='muted'>{e(source)}</span></nav><h1>{e(title)}</h1>{body}</body></html>")


def _table(head: list, rows: list) -> str:
    """`rows` hold already-escaped HTML cells."""
    h = "".join(f"<th>{e(c)}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{b}</table>"


def _unknown(v) -> str:
    return "<span class='muted'>n/a</span>" if v is None else e(v)


def _nodes(ids) -> str:
    """A replica list as kafka-topics.sh prints it (``1,2,3``); n/a when unknown."""
    return _unknown(None if ids is None else ",".join(str(i) for i in ids))


def _leader(p: dict) -> str:
    return "none" if p["leader"] == -1 else _unknown(p["leader"])


def overview(source: str, topics: list, groups: list, series: dict) -> str:
    trows = []
    for t in topics:
        ps = t["partitions"]
        size = None if any(p["size_bytes"] is None for p in ps) else sum(p["size_bytes"] for p in ps)
        trows.append([f"<a href='/topics/{e(urllib.parse.quote(t['name']))}'>{e(t['name'])}</a>",
                      e(len(ps)), e(sum(p["log_end_offset"] - p["log_start_offset"] for p in ps)),
                      _unknown(size)])
    grows = [[f"<a href='/groups/{e(urllib.parse.quote(g))}'>{e(g)}</a>", e(pt), e(st)]
             for g, pt, st in groups]
    body = (f"<h2>Topics</h2>{_table(['topic', 'partitions', 'records', 'bytes'], trows)}"
            f"<h2>Consumer groups</h2>{_table(['group', 'protocol type', 'state'], grows)}"
            f"<h2>Metrics</h2>{_charts(series)}")
    return _page("Overview", source, body)


def topic(source: str, t: dict, token: str) -> str:
    name = t["name"]
    rows = []
    for p in t["partitions"]:
        link = f"/browse?{q(topic=name, partition=p['partition'])}"
        rows.append([e(p["partition"]), _leader(p), _nodes(p["replicas"]), _nodes(p["isr"]),
                     e(p["log_start_offset"]), e(p["high_watermark"]),
                     e(p["log_end_offset"]), _unknown(p["size_bytes"]), _unknown(p["segments"]),
                     f"<a href='{link}'>browse</a>"])
    crow = [[e(k) + (" <b>(set)</b>" if k in t["overrides"] else ""), f"<pre>{e(v)}</pre>"]
            for k, v in t["config"].items()]
    opts = "".join(f"<option>{e(p['partition'])}</option>" for p in t["partitions"])
    form = (f"<form method='post' action='/produce' id='produce'>"
            f"<input type='hidden' name='token' value='{e(token)}'>"
            f"<input type='hidden' name='topic' value='{e(name)}'>"
            f"partition <select name='partition'>{opts}</select> "
            f"key <input name='key' id='produce-key'> "
            f"value <input name='value' id='produce-value' size='40'><br>"
            f"headers (one <code>name=value</code> a line)<br>"
            f"<textarea name='headers' rows='2' cols='40'></textarea><br>"
            f"<button type='submit' id='produce-submit'>Produce</button></form>")
    heads = ['partition', 'leader', 'replicas', 'isr', 'log start', 'high watermark', 'log end', 'bytes',
             'segments', '']
    body = (f"<p>topic id {e(t['topic_id']) or '<span class=muted>n/a</span>'}</p>"
            f"<h2>Partitions</h2>"
            f"{_table(heads, rows)}"
            f"<h2>Produce a test record</h2>{form}"
            f"<h2>Configuration</h2>{_table(['key', 'value'], crow)}")
    return _page(f"Topic {name}", source, body)


def group(source: str, g: dict) -> str:
    mrows = [[e(m["member_id"]), e(m["client_id"]), e(m["host"]),
              e(", ".join(f"{t}-{p}" for t, p in m["partitions"]))] for m in g["members"]]
    orows = [[e(o["topic"]), e(o["partition"]), e(o["committed"]), _unknown(o["high_watermark"]),
              _unknown(o["lag"])] for o in g["offsets"]]
    total = sum(o["lag"] or 0 for o in g["offsets"])
    body = (f"<p>state <b>{e(g['state'])}</b>, protocol {e(g['protocol'])}, total lag <b>{e(total)}</b></p>"
            f"<h2>Members</h2>{_table(['member', 'client id', 'host', 'partitions'], mrows)}"
            f"<h2>Offsets and lag</h2>{_table(['topic', 'partition', 'committed', 'high watermark', 'lag'], orows)}")
    return _page(f"Group {g['group_id']}", source, body)


def _show(b: bytes | None, fmt: str) -> str:
    if b is None:
        return "<span class='muted'>null</span>"
    cut = b[:SHOW_BYTES]
    note = (f" <span class='muted'>({len(b)} bytes, first {SHOW_BYTES} shown)</span>"
            if len(b) > SHOW_BYTES else "")
    return f"<pre>{e(render(cut, fmt))}</pre>{note}"


def render(b: bytes, fmt: str) -> str:
    if fmt == "hex":
        return b.hex(" ")
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:          # binary: text or JSON would only show replacement marks
        return "(not UTF-8) " + b.hex(" ")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def _ts(ms: int) -> str:
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def record_dict(r, fmt: str) -> dict:
    return {"offset": r.offset, "timestamp": r.timestamp,
            "key": None if r.key is None else render(r.key[:SHOW_BYTES], fmt),
            "value": None if r.value is None else render(r.value[:SHOW_BYTES], fmt),
            "value_bytes": None if r.value is None else len(r.value),
            "headers": [[k, None if v is None else render(v[:SHOW_BYTES], fmt)] for k, v in r.headers]}


def browse(source: str, topic_name: str, partition: int, data: dict, fmt: str, limit: int) -> str:
    recs = data["records"]
    rows = []
    for r in recs:
        hdrs = "<br>".join(f"{e(k)}: {_show(v, fmt)}" for k, v in r.headers)
        rows.append([e(r.offset), e(_ts(r.timestamp)), _show(r.key, fmt), _show(r.value, fmt), hdrs])
    fmts = " ".join(
        f"<b>{f}</b>" if f == fmt else
        f"<a href='/browse?{q(topic=topic_name, partition=partition, offset=data['offset'], format=f, limit=limit)}'>"
        f"{f}</a>"
        for f in FORMATS)
    nxt = ""
    if recs and recs[-1].offset + 1 < data["high_watermark"]:
        after = q(topic=topic_name, partition=partition, offset=recs[-1].offset + 1, format=fmt, limit=limit)
        nxt = f"<a id='next' href='/browse?{after}'>next page</a>"
    form = (f"<form method='get' action='/browse'><input type='hidden' name='topic' value='{e(topic_name)}'>"
            f"<input type='hidden' name='partition' value='{e(partition)}'>"
            f"<input type='hidden' name='format' value='{e(fmt)}'>"
            f"offset <input name='offset' size='8'> or timestamp (ms) <input name='timestamp' size='14'> "
            f"<button>Go</button></form>")
    body = (f"<p><a href='/topics/{e(urllib.parse.quote(topic_name))}'>topic {e(topic_name)}</a>, "
            f"partition {e(partition)}: "
            f"offsets {e(data['log_start_offset'])} to {e(data['high_watermark'])}; "
            f"showing {len(recs)} from offset {e(data['offset'])} (at most {e(limit)} a page)</p>"
            f"{form}<p>show as {fmts}</p>"
            f"{_table(['offset', 'timestamp', 'key', 'value', 'headers'], rows)}<p>{nxt}</p>")
    return _page(f"Messages of {topic_name}-{partition}", source, body)


def _chart(name: str, points: list) -> str:
    w, h = 320, 70
    if not points:
        return ""
    vs = [v for _t, v in points]
    if len(vs) == 1:
        vs = vs * 2                      # one sample: a flat line, not an invisible point
    lo, hi = min(vs), max(vs)
    span = (hi - lo) or 1.0
    n = max(len(points) - 1, 1)
    pts = " ".join(f"{i * w / n:.1f},{h - 5 - (v - lo) * (h - 10) / span:.1f}" for i, v in enumerate(vs))
    return (f"<div class='chart'><div>{e(name)}: <b>{e(f'{vs[-1]:g}')}</b></div>"
            f"<svg width='{w}' height='{h}' viewBox='0 0 {w} {h}' role='img' aria-label='{e(name)}'>"
            f"<rect width='{w}' height='{h}' fill='#f7f7f7' stroke='#ccc'/>"
            f"<polyline fill='none' stroke='#2a6' stroke-width='2' points='{pts}'/></svg></div>")


def _charts(series: dict) -> str:
    if not series:
        return "<p class='muted'>no samples yet</p>"
    return "".join(_chart(name, pts) for name, pts in sorted(series.items()))


def charts(source: str, series: dict) -> str:
    return _page("Metrics", source, _charts(series) + "<p class='muted'>sampled every few seconds; "
                 "the last 90 samples</p>")


def error(code: int, message: str) -> str:
    return _page(f"Error {code}", "", f"<p>{e(message)}</p>")
