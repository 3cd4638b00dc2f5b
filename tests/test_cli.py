"""The command line, run as a user would: `python -m engine ...` in a subprocess."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args, input=None, check=True):
    r = subprocess.run([sys.executable, "-m", "engine", *args], input=input, capture_output=True,
                       cwd=ROOT, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"exit {r.returncode}: {r.stderr.decode()}")
    return r


def test_topics_produce_consume_dump(tmp_path):
    d = str(tmp_path / "data")
    run("topics", "--data-dir", d, "create", "logs", "--partitions", "2", "--topic-config", "retention.ms=60000")
    assert run("topics", "--data-dir", d, "list").stdout.decode().split() == ["logs"]
    desc = run("topics", "--data-dir", d, "describe", "logs").stdout.decode()
    assert "PartitionCount: 2" in desc and "retention.ms=60000" in desc
    lines = b"".join(b"k%d:line %d\n" % (i % 3, i) for i in range(200))
    run("produce", "--data-dir", d, "logs", "--key-separator", ":", "--compression", "lz4", input=lines)
    out = run("consume", "--data-dir", d, "logs", "--from-beginning", "--timeout-ms", "200").stdout
    assert sorted(out.splitlines()) == sorted(b"line %d" % i for i in range(200))
    out = run("consume", "--data-dir", d, "logs", "--offset", "0",
              "--max-messages", "1", "--print-key", "--print-offsets").stdout.decode()
    part, offset, _ts, key, value = out.rstrip("\n").split("\t")
    assert part in ("0", "1") and offset == "0" and key.startswith("k")
    assert value.startswith("line ")
    seg = max((os.path.join(d, f"logs-{p}", "00000000000000000000.log") for p in (0, 1)),
              key=os.path.getsize)
    dump = run("dump-log", seg, "--print-records").stdout.decode()
    assert "compresscodec: lz4" in dump and "isvalid: true" in dump and "| offset: 0" in dump
    idx = run("dump-log", seg[:-4] + ".index").stdout.decode()
    assert idx.startswith("Dumping")
    run("topics", "--data-dir", d, "delete", "logs")
    assert run("topics", "--data-dir", d, "list").stdout.decode().split() == []


def test_dump_log_reports_corruption(tmp_path):
    d = str(tmp_path / "data")
    run("produce", "--data-dir", d, "t", input=b"".join(b"record %d\n" % i for i in range(10)))
    seg = os.path.join(d, "t-0", "00000000000000000000.log")
    with open(seg, "r+b") as f:
        f.seek(70)
        b = f.read(1)
        f.seek(70)
        f.write(bytes([b[0] ^ 0xFF]))
    r = run("dump-log", seg, check=False)
    assert r.returncode == 1
    assert b"isvalid: false" in r.stdout


def test_unknown_config_is_a_clear_error(tmp_path):
    r = run("topics", "--data-dir", str(tmp_path / "d"), "create", "t", "--topic-config", "bogus.key=1",
            check=False)
    assert r.returncode == 2
    assert b"bogus.key" in r.stderr


def test_dump_index_files(tmp_path):
    import engine

    d = str(tmp_path / "data")
    with engine.open(d, background=False) as eng:
        eng.create_topic("t", 1, {"index.interval.bytes": 100})
        with eng.producer(linger_ms=0) as p:
            for i in range(20):
                p.send("t", b"x" * 200, timestamp=1000 + i)
    base = os.path.join(d, "t-0", "00000000000000000000")
    out = run("dump-log", base + ".index").stdout.decode().splitlines()
    size = os.path.getsize(base + ".log") // 20  # 20 equal one-record batches
    assert out[1:3] == [f"offset: 1 position: {size}", f"offset: 2 position: {2 * size}"]
    tout = run("dump-log", base + ".timeindex").stdout.decode().splitlines()
    assert tout[1] == "timestamp: 1001 offset: 1"


def test_unclean_open_reports_what_was_dropped(tmp_path):
    d = str(tmp_path / "data")
    run("produce", "--data-dir", d, "t", input=b"".join(b"record %d\n" % i for i in range(50)))
    os.unlink(os.path.join(d, ".kafka_cleanshutdown"))
    seg = os.path.join(d, "t-0", "00000000000000000000.log")
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07" + b"garbage" * 5)  # a torn tail
    r = run("consume", "--data-dir", d, "t", "--from-beginning", "--timeout-ms", "100")
    assert r.stdout.count(b"\n") == 50
    r = run("topics", "--data-dir", d, "create", "other")
    assert b"recovery:" in r.stderr and seg.encode() in r.stderr


def test_topics_clean_compacts_a_compacted_topic(tmp_path):
    d = str(tmp_path / "data")
    run("topics", "--data-dir", d, "create", "cc", "--partitions", "1",
        "--topic-config", "cleanup.policy=compact", "--topic-config", "segment.bytes=1024")
    for r in range(3):  # three produce runs: three segments at least
        lines = b"".join(b"k%d:v%d-%d\n" % (i % 5, r, i) for i in range(50))
        run("produce", "--data-dir", d, "cc", "--key-separator", ":", input=lines)
    out = run("topics", "--data-dir", d, "clean", "cc").stdout.decode()
    assert out.startswith("cc-0: 100 records indexed, 5 kept, 95 removed"), out
    got = run("consume", "--data-dir", d, "cc", "--from-beginning", "--timeout-ms", "200").stdout.splitlines()
    assert got == [b"v1-%d" % i for i in range(45, 50)] + [b"v2-%d" % i for i in range(50)]


def test_user_mistakes_are_one_line_errors_and_read_commands_create_nothing(tmp_path):
    missing = str(tmp_path / "nope")
    for argv in (["topics", "--data-dir", missing, "list"],
                 ["topics", "--data-dir", missing, "describe"],
                 ["consume", "--data-dir", missing, "t"],
                 ["groups", "--data-dir", missing, "list"]):
        r = run(*argv, check=False)
        assert r.returncode != 0
        assert r.stderr.decode().strip() == f"error: data directory {missing} does not exist"
    assert not os.path.exists(missing)
    for argv, needle in ((["serve", str(tmp_path / "server.properties")], "server.properties: No such file"),
                         (["dump-log", str(tmp_path / "0.log")], "0.log: No such file")):
        r = run(*argv, check=False)
        err = r.stderr.decode()
        assert r.returncode != 0 and needle in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
    r = run("--debug", "dump-log", str(tmp_path / "0.log"), check=False)
    assert b"Traceback" in r.stderr                 # --debug shows it
    assert run("--version").stdout.decode().startswith("kafka-engine ")


def test_port_in_use_names_the_address(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        addr = f"127.0.0.1:{s.getsockname()[1]}"
        r = run("serve", "--data-dir", str(tmp_path / "d"), "--listen", addr, "--log-level", "error",
                check=False)
    assert r.returncode != 0
    assert r.stderr.decode().strip().endswith(f"error: cannot listen on {addr}: address already in use")


def test_every_option_has_help():
    from engine.__main__ import build_parser
    parser = build_parser()
    subs = [a for a in parser._actions if a.dest == "command"][0].choices
    missing = [f"{name} {act.dest}" for name, sp in subs.items() for act in sp._actions
               if act.help is None and act.dest != "help"]
    assert missing == []


def test_configs_headers_format_and_groups_in_process(tmp_path):
    d = str(tmp_path / "d")
    run("topics", "--data-dir", d, "create", "t", "--partitions", "2", "--topic-config", "retention.ms=5000")
    run("produce", "--data-dir", d, "t", "--header", "h=1", input=b"a\nb\n")
    out = run("configs", "--data-dir", d, "--entity-type", "topics", "--entity-name", "t").stdout.decode()
    assert out.splitlines()[1:] == ["  retention.ms=5000 sensitive=false source=DYNAMIC_TOPIC_CONFIG"]
    first = run("consume", "--data-dir", d, "t", "--from-beginning", "--group", "g", "--format", "%s %h\\n",
                "--timeout-ms", "300").stdout
    assert sorted(first.splitlines()) == [b"a h=1", b"b h=1"]
    again = run("consume", "--data-dir", d, "t", "--from-beginning", "--group", "g", "--timeout-ms", "300")
    assert again.stdout == b""          # the group committed its position


def test_bad_properties_are_one_line_naming_file_line_and_key(tmp_path):
    cases = {"num.partitions=3\nthis line is bad\n": "bad.properties line 2: expected key=value",
             "num.partitions=-3\n": "num.partitions: -3 is below the minimum 1",
             "num.partitions=x\n": "num.partitions: expected an integer, got 'x'",
             "num.io.threads=many\n": "num.io.threads: expected an integer"}
    for text, needle in cases.items():
        props = tmp_path / "bad.properties"
        props.write_text(text)
        r = run("serve", str(props), "--data-dir", str(tmp_path / "never"), check=False)
        err = r.stderr.decode().strip()
        assert r.returncode == 2 and needle in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / "never").exists()      # refused before anything is created
