"""One consumer group mixing an embedded consumer (in the broker's process, on the
Engine's coordinator) with confluent-kafka members over the wire: the same
coordinator and the same consumer-protocol bytes serve both."""

from __future__ import annotations

import threading

from .groups_util import GROUP_BROKER_CONFIG, HEARTBEAT_MS, SESSION_MS, Member, produce, wait_until

PARTS = 6


class EmbeddedMember(threading.Thread):
    def __init__(self, eng, group: str, topic: str):
        super().__init__(daemon=True, name="member-embedded")
        self.c = eng.consumer(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                              session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
        self.c.subscribe([topic])
        self.consumed: list[tuple[int, int]] = []
        self.assignment: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self._stop_evt = threading.Event()

    def run(self):
        try:
            while not self._stop_evt.is_set():
                recs = self.c.poll(100)
                self.consumed += [(r.partition, r.offset) for r in recs]
                if recs:
                    self.c.commit()
                self.assignment = frozenset(tp.partition for tp in self.c.assignment())
        except BaseException as e:
            self.error = e
        finally:
            self.c.close()

    def stop(self):
        self._stop_evt.set()
        self.join(20)


def test_embedded_and_wire_members_share_a_group(make_broker):
    b = make_broker(GROUP_BROKER_CONFIG)
    b.call(lambda: b.engine.create_topic("t", PARTS))
    produce(b.bootstrap, "t", PARTS, 10)
    emb = EmbeddedMember(b.engine, "mixed", "t")
    wire = Member("confluent", b.bootstrap, "mixed", "t")
    emb.start()
    wire.start()
    try:
        wait_until(lambda: emb.assignment and wire.assignment
                   and emb.assignment | wire.assignment == frozenset(range(PARTS))
                   and not emb.assignment & wire.assignment, what="a split between embedded and wire")
        wait_until(lambda: len(emb.consumed) + len(wire.consumed) >= PARTS * 10, what="everything read")
        emb.stop()                                   # leaves: the wire member takes over at the commits
        wait_until(lambda: wire.assignment == frozenset(range(PARTS)), what="handover to the wire member")
        produce(b.bootstrap, "t", PARTS, 2, tag=b"late")
        wait_until(lambda: len(emb.consumed) + len(wire.consumed) >= PARTS * 12, what="late records")
    finally:
        emb.stop()
        wire.stop()
    assert emb.error is None and wire.error is None
    seen = emb.consumed + wire.consumed
    assert sorted(seen) == sorted({(p, o) for p in range(PARTS) for o in range(12)})   # no gap, no dup


READER = r"""
import sys, time, json, engine
path, group = sys.argv[1], sys.argv[2]
with engine.open(path, read_only=True) as ro:
    c = ro.consumer(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                    session_timeout_ms=2000, heartbeat_interval_ms=300)
    c.subscribe(["t"])
    seen = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        recs = c.poll(100)
        seen += [[r.partition, r.offset] for r in recs]
        if recs:
            c.commit()
        parts = sorted(tp.partition for tp in c.assignment())
        print(json.dumps({"parts": parts, "n": len(seen)}), flush=True)
        if sys.stdin in __import__("select").select([sys.stdin], [], [], 0)[0]:
            break
    c.close()
    print(json.dumps({"done": seen}), flush=True)
"""


def test_read_only_consumers_in_other_processes_join_through_the_owning_broker(make_broker, tmp_path):
    """Processes that only read the directory join the group of the broker that owns it
    (found in the lock file); records are read from the files, membership and commits go
    over the wire."""
    import json
    import subprocess
    import sys

    import engine

    b = make_broker(GROUP_BROKER_CONFIG)
    b.call(lambda: b.engine.create_topic("t", PARTS))
    produce(b.bootstrap, "t", PARTS, 10)
    path = b.engine.path
    assert engine.broker_address(path) == b.bootstrap
    proc = subprocess.Popen([sys.executable, "-c", READER, path, "ro"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        with engine.open(path, read_only=True) as ro:
            c = ro.consumer(group_id="ro", auto_offset_reset="earliest", enable_auto_commit=False,
                            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
            c.subscribe(["t"])
            mine: list = []
            other: dict = {}

            def split():
                recs = c.poll(100)
                mine.extend((r.partition, r.offset) for r in recs)
                if recs:
                    c.commit()
                line = proc.stdout.readline()
                other.update(json.loads(line))
                ours = {tp.partition for tp in c.assignment()}
                return ours and other["parts"] and not ours & set(other["parts"]) \
                    and ours | set(other["parts"]) == set(range(PARTS)) \
                    and len(mine) + other["n"] == PARTS * 10

            wait_until(split, timeout=30, what="two read-only processes split the topic")
            c.close()
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        lines = [json.loads(x) for x in proc.stdout.read().splitlines()]
        theirs = [tuple(x) for x in lines[-1]["done"]]
    finally:
        proc.kill()
        proc.wait()
    assert sorted(mine + theirs) == sorted((p, o) for p in range(PARTS) for o in range(10))
    # the commits are the broker's: a wire client sees them
    from .groups_util import committed_offsets
    assert committed_offsets(b.bootstrap, "ro", "t", PARTS) == {p: 10 for p in range(PARTS)}


def test_an_embedded_writer_serves_its_directory_for_other_processes(tmp_path):
    """Engine.serve(): the writer process keeps its in-process consumer and lets a read-only
    process join the same group through the listener it records in the directory."""
    import json
    import subprocess
    import sys

    import engine

    path = str(tmp_path / "d")
    with engine.open(path, GROUP_BROKER_CONFIG) as eng:
        eng.create_topic("t", PARTS)
        with eng.producer() as p:
            for part in range(PARTS):
                for i in range(10):
                    p.send("t", b"%d" % i, partition=part)
        with eng.serve("127.0.0.1:0") as srv:
            assert engine.broker_address(path) == srv.bootstrap
            proc = subprocess.Popen([sys.executable, "-c", READER, path, "w"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
            try:
                c = eng.consumer(group_id="w", auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
                c.subscribe(["t"])
                other: dict = {}

                def split():
                    c.poll(100)
                    other.update(json.loads(proc.stdout.readline()))
                    ours = {tp.partition for tp in c.assignment()}
                    return ours and other["parts"] and not ours & set(other["parts"]) \
                        and ours | set(other["parts"]) == set(range(PARTS))

                wait_until(split, timeout=30, what="writer and read-only process split the topic")
                c.close()
                proc.stdin.write("stop\n")
                proc.stdin.flush()
                proc.communicate(timeout=30)
            finally:
                proc.kill()
                proc.wait()
        assert engine.broker_address(path) is None


def test_groups_cli_lists_describes_and_deletes(tmp_path, capsys):
    """`python -m engine groups`: through the owning broker over the wire, and in-process
    when no process holds the directory; describe shows committed offsets and lag."""
    import engine
    from engine.__main__ import main
    from engine.server import BackgroundBroker

    path = str(tmp_path / "d")
    with engine.open(path, GROUP_BROKER_CONFIG) as eng:
        eng.create_topic("t", 2)
        with eng.producer() as p:
            for part in range(2):
                for i in range(5):
                    p.send("t", b"%d" % i, partition=part)
        c = eng.consumer(group_id="cli", auto_offset_reset="earliest", enable_auto_commit=False,
                         session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
        c.subscribe(["t"])
        wait_until(lambda: len(c.poll(100)) >= 0 and len(c.assignment()) == 2, what="assignment")
        c.commit({("t", 0): 3, ("t", 1): 5})
        with BackgroundBroker(eng) as _srv:                   # owned by a broker: over the wire
            assert main(["groups", "--data-dir", path, "list"]) == 0
            assert "cli\tconsumer\tStable" in capsys.readouterr().out
            assert main(["groups", "--data-dir", path, "describe", "cli"]) == 0
            out = capsys.readouterr().out
            assert "is Stable" in out
            assert "cli\tt\t0\t3\t5\t2\t" in out and "cli\tt\t1\t5\t5\t0\t" in out
            assert main(["groups", "--data-dir", path, "delete", "cli"]) == 2    # NON_EMPTY_GROUP
            assert "error" in capsys.readouterr().err
        c.close()
    # no process holds the directory: the command opens it and asks its own coordinator
    assert main(["groups", "--data-dir", path, "describe", "cli"]) == 0
    out = capsys.readouterr().out
    assert "is Empty" in out and "cli\tt\t0\t3\t5\t2\t-" in out
    assert main(["groups", "--data-dir", path, "delete", "cli"]) == 0
    capsys.readouterr()
    assert main(["groups", "--data-dir", path, "list"]) == 0
    assert "cli" not in capsys.readouterr().out
