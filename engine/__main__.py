"""Command line: ``python -m engine <command>``.

Commands:
  topics    create / list / describe / delete / alter topics of a data directory
  produce   send lines from stdin as records
  consume   print records to stdout
  configs   describe or alter topic and broker configs
  dump-log  list every batch of a segment file (offsets, sizes, codec, CRC check)
  bench     run the storage benchmarks, print the table and write JSON
  serve     run the Kafka wire-protocol broker on a data directory (--zookeeper: in a cluster)
  cluster   run ZooKeeper and N brokers on 127.0.0.1 (a local cluster)
  chaos     that cluster under an acks=all producer while brokers are killed; checks nothing is lost
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from .config import is_sensitive

__all__ = ["main"]

class Progress:
    """A one-line progress report on stderr, only when stderr is a terminal."""

    def __init__(self, label: str, total: int | None = None, enabled: bool | None = None):
        self.label = label
        self.total = total
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.done = 0
        self._last = 0.0
        self._start = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and now - self._last > 0.2:
            self._last = now
            rate = self.done / max(now - self._start, 1e-9)
            if self.total:
                msg = f"\r{self.label}: {self.done:,}/{self.total:,} ({100 * self.done / self.total:.0f}%)"
            else:
                msg = f"\r{self.label}: {self.done:,}"
            sys.stderr.write(f"{msg}  {rate:,.0f}/s ")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _parse_kv(pairs: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in pairs or ():
        if "=" not in item:
            raise SystemExit(f"error: expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _open(args: argparse.Namespace, read_only: bool = False):
    import engine

    if read_only and not os.path.isdir(args.data_dir):
        raise SystemExit(f"error: data directory {args.data_dir} does not exist")

    eng = engine.open(args.data_dir, _parse_kv(getattr(args, "config", None)) or None,
                      read_only=read_only, background=False)
    for ev in eng.recovery_report:  # what an unclean shutdown cost, said once on stderr
        where = f" at byte {ev.position}" if ev.position is not None else ""
        print(f"recovery: {ev.path}{where}: {ev.reason} ({ev.bytes_dropped} bytes dropped)",
              file=sys.stderr)
    return eng


def _remote(args: argparse.Namespace) -> str | None:
    """The broker to talk to: --bootstrap-server, else the one that owns --data-dir (its writer
    lock keeps this process out, so going through it is the only way to change anything)."""
    if getattr(args, "bootstrap_server", None):
        return args.bootstrap_server
    import engine
    if getattr(args, "data_dir", None) and os.path.isdir(args.data_dir):
        return engine.broker_address(args.data_dir)
    return None


def _emitter(args: argparse.Namespace):
    """How consume prints a record: --format (kcat's -f tokens), else the --print-* flags."""
    from .cli_remote import format_record

    out = sys.stdout.buffer

    def emit(topic, partition, offset, ts, key, value, headers) -> None:
        if args.format is not None:
            out.write(format_record(args.format, topic, partition, offset, ts, key, value, headers))
            return
        if args.print_offsets:
            out.write(f"{partition}\t{offset}\t{ts}\t".encode())
        if args.print_headers:
            out.write(b",".join(k.encode() + b"=" + (v or b"") for k, v in headers) + b"\t")
        if args.print_key:
            out.write((key if key is not None else b"null") + b"\t")
        out.write((value if value is not None else b"null") + b"\n")
    return emit


def cmd_topics(args: argparse.Namespace) -> int:
    """kafka-topics.sh: through a broker (``WireAdmin``) or in-process (``Engine``); both have
    create_topic / list_topics / delete_topic / create_partitions / alter_topic_config."""
    remote = _remote(args) if args.action != "clean" else None
    if remote:
        from .cli_remote import command_security
        from .client.admin import WireAdmin
        backend = WireAdmin(remote, security=command_security(args))
    else:
        backend = _open(args, read_only=args.action in ("list", "describe"))
    with backend as b:
        if args.action == "create":
            rf = {} if args.replication_factor is None else {"replication_factor": args.replication_factor}
            b.create_topic(args.topic, args.partitions, _parse_kv(args.topic_config), **rf)
            print(f"Created topic {args.topic}.")
        elif args.action == "list":
            for name in b.list_topics():
                print(name)
        elif args.action == "delete":
            b.delete_topic(args.topic)
            print(f"Deleted topic {args.topic}.")
        elif args.action == "alter":
            if args.partitions is not None:
                b.create_partitions(args.topic, args.partitions)
            if args.topic_config or args.delete_config:
                b.alter_topic_config(args.topic, _parse_kv(args.topic_config), args.delete_config or ())
            print(f"Altered topic {args.topic}.")
        elif args.action == "clean":  # log compaction now, below the active segment
            for name in [args.topic] if args.topic else b.list_topics():
                for part in range(b.partitions_for(name)):
                    st = b.log(name, part).clean()
                    what = (f"{st.records_read} records indexed, {st.records_kept} kept, "
                            f"{st.records_removed} removed, {st.segments_written} segments written "
                            f"({st.bytes_written} bytes)" if st.cleaned else st.reason)
                    print(f"{name}-{part}: {what}")
        elif remote:
            from .cli_remote import describe_topics
            describe_topics(b, [args.topic] if args.topic else b.list_topics())
        else:
            for name in [args.topic] if args.topic else b.list_topics():
                d = b.describe_topic(name)
                overrides = ",".join(f"{k}={v}" for k, v in sorted(d.overrides.items()))
                print(f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {len(d.partitions)}"
                      f"\tConfigs: {overrides}")
                for p in d.partitions:
                    print(f"\tPartition: {p.partition}\tLogStartOffset: {p.log_start_offset}"
                          f"\tHighWatermark: {p.high_watermark}\tLogEndOffset: {p.log_end_offset}"
                          f"\tSize: {p.size_bytes}\tSegments: {p.segments}")
    return 0


def cmd_configs(args: argparse.Namespace) -> int:
    """kafka-configs.sh --describe / --alter, over the wire or in-process."""
    remote = _remote(args)
    if remote:
        from . import cli_remote
        return cli_remote.configs(args, remote, _parse_kv)
    with _open(args, read_only=not args.alter) as eng:
        kind = args.entity_type[:-1]
        if args.entity_type == "brokers":
            if args.alter:
                raise SystemExit("error: broker configs are static here (set them in server.properties)")
            values, overrides = dict(eng.config.values), dict(eng.config.explicit)
        else:
            if args.alter:
                eng.alter_topic_config(args.entity_name, _parse_kv(args.add_config), args.delete_config or ())
                print(f"Completed updating config for {kind} {args.entity_name}.")
                return 0
            cfg = eng.topic_config(args.entity_name)
            values, overrides = dict(cfg), dict(cfg.overrides)
        print(f"{'All configs' if args.all else 'Dynamic configs'} for {kind} {args.entity_name} are:")
        for k in sorted(values if args.all else overrides):
            source = ("DYNAMIC_TOPIC_CONFIG" if kind == "topic" else "STATIC_BROKER_CONFIG") \
                if k in overrides else "DEFAULT_CONFIG"
            secret = is_sensitive(k)        # as kafka-configs.sh: a password is never printed
            value = "(sensitive)" if secret else values.get(k, overrides.get(k))
            print(f"  {k}={value} sensitive={str(secret).lower()} source={source}")
    return 0


def cmd_groups(args: argparse.Namespace) -> int:
    """Like kafka-consumer-groups.sh: --list, --describe (offsets and lag), --delete."""
    from .group_admin import GroupAdmin

    if args.action != "list" and not args.group:
        raise SystemExit(f"error: groups {args.action} needs a GROUP")
    if not args.bootstrap_server and not os.path.isdir(args.data_dir):
        raise SystemExit(f"error: data directory {args.data_dir} does not exist")
    from .cli_remote import command_security
    with GroupAdmin(args.data_dir, bootstrap=args.bootstrap_server, security=command_security(args)) as admin:
        if args.action == "list":
            for gid, ptype, state in admin.list():
                print(f"{gid}\t{ptype or '-'}\t{state}")
        elif args.action == "delete":
            admin.delete(args.group)
            print(f"Deleted consumer group {args.group}.")
        else:
            g = admin.describe(args.group)
            print(f"Consumer group '{g.group_id}' is {g.state} (protocol {g.protocol or '-'}, "
                  f"{len(g.members)} members).")
            owner = {tp: m for m in g.members for tp in m.partitions}
            rows = sorted(set(g.offsets) | set(owner))
            print("GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
            for topic, part in rows:
                cur = g.offsets.get((topic, part))
                end = admin.log_end_offset(topic, part)
                lag = "-" if cur is None or end is None else str(max(end - cur, 0))
                m = owner.get((topic, part))
                print(f"{g.group_id}\t{topic}\t{part}\t{'-' if cur is None else cur}\t"
                      f"{'-' if end is None else end}\t{lag}\t{m.member_id if m else '-'}\t"
                      f"{m.host if m else '-'}\t{m.client_id if m else '-'}")
    return 0


def _input_lines(args: argparse.Namespace):
    if args.file:
        with open(args.file, "rb") as f:
            yield from f
    else:
        yield from sys.stdin.buffer


def cmd_produce(args: argparse.Namespace) -> int:
    remote = _remote(args)
    if remote:
        from . import cli_remote
        progress = Progress(f"produce {args.topic}")
        try:
            return cli_remote.produce(args, remote, _input_lines(args), progress)
        finally:
            progress.close()
    settings: dict[str, Any] = {"linger_ms": args.linger_ms}
    if args.compression:
        settings["compression_type"] = args.compression
    sep = args.key_separator.encode() if args.key_separator else None
    progress = Progress(f"produce {args.topic}")
    n = 0
    with _open(args) as eng:
        eng.ensure_topic(args.topic)
        headers = [(k, v.encode()) for k, v in (h.split("=", 1) for h in (args.header or []))]
        with eng.producer(**settings) as producer:
            for line in _input_lines(args):
                line = line.rstrip(b"\r\n")
                key = None
                if sep is not None and sep in line:
                    key, line = line.split(sep, 1)
                producer.send(args.topic, line, key=key, partition=args.partition, headers=headers)
                n += 1
                progress.update()
            producer.flush()
    progress.close()
    print(f"Produced {n} records to {args.topic}.", file=sys.stderr)
    return 0


def cmd_consume(args: argparse.Namespace) -> int:
    emit = _emitter(args)
    remote = _remote(args)
    if remote:
        from . import cli_remote
        return cli_remote.consume(args, remote, emit)
    # a group needs a coordinator: this process's own when no broker owns the directory
    with _open(args, read_only=not args.group) as eng:
        reset = "earliest" if args.from_beginning else "latest"
        if args.group:
            consumer = eng.consumer(auto_offset_reset=reset, group_id=args.group,
                                    enable_auto_commit=False)
            consumer.subscribe([args.topic])
        else:
            consumer = eng.consumer(auto_offset_reset=reset)
            n_parts = eng.partitions_for(args.topic)
            parts = [args.partition] if args.partition is not None else list(range(n_parts))
            consumer.assign([(args.topic, p) for p in parts])
            if args.offset is not None:
                for p in parts:
                    consumer.seek((args.topic, p), args.offset)
            elif args.from_beginning:
                consumer.seek_to_beginning()
        n = 0
        idle_deadline = time.monotonic() + args.timeout_ms / 1000.0
        while args.max_messages is None or n < args.max_messages:
            batch = consumer.poll(timeout_ms=100,
                                  max_records=None if args.max_messages is None
                                  else min(500, args.max_messages - n))
            if not batch:
                if time.monotonic() > idle_deadline:
                    break
                continue
            idle_deadline = time.monotonic() + args.timeout_ms / 1000.0
            for rec in batch:
                emit(args.topic, rec.partition, rec.offset, rec.timestamp, rec.key, rec.value,
                     rec.headers)
                n += 1
        if args.group:
            consumer.commit()
            consumer.close()
        sys.stdout.buffer.flush()
    print(f"Processed a total of {n} messages", file=sys.stderr)
    return 0


def cmd_dump_log(args: argparse.Namespace) -> int:
    from .dump import dump_log
    return dump_log(args.file, args.print_records, args.print_payload)


def cmd_bench(args: argparse.Namespace) -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in sys.path:
        sys.path.insert(0, root)
    from bench.runner import run_all

    results = run_all(quick=args.quick, only=args.only, data_dir=args.bench_dir)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    from . import __version__
    p.add_argument("--version", action="version", version=f"kafka-engine {__version__}")
    p.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    sub = p.add_subparsers(dest="command", required=True)

    def with_dir(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--data-dir", default="./data",
                        help="data directory (default ./data); through its broker when one owns it")
        sp.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT",
                        help="talk to this running broker (ours or Kafka) instead of a data directory")
        sp.add_argument("--command-config", default=None, metavar="FILE",
                        help="client properties for TLS / SASL (security.protocol, ssl.*, sasl.*), "
                             "as Kafka's tools take")
        sp.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="engine config (Kafka broker keys), repeatable")

    t = sub.add_parser("topics", help="create, list, describe, alter, delete or clean (compact) topics")
    with_dir(t)
    t.add_argument("action", choices=["create", "list", "describe", "delete", "alter", "clean"],
                   help="what to do")
    t.add_argument("topic", nargs="?", help="the topic (describe/clean: all topics when omitted)")
    t.add_argument("--partitions", type=int, default=None,
                   help="partitions of a new topic (default: num.partitions); alter: grow to this many")
    t.add_argument("--replication-factor", type=int, default=None,
                   help="replicas of a new topic (default: default.replication.factor)")
    t.add_argument("--topic-config", action="append", metavar="KEY=VALUE",
                   help="topic config (segment.bytes, retention.ms, ...), repeatable")
    t.add_argument("--delete-config", action="append", metavar="KEY",
                   help="topic config override to remove (alter), repeatable")
    t.set_defaults(func=cmd_topics)

    g = sub.add_parser("groups", help="list, describe (offsets, lag) or delete consumer groups")
    g.add_argument("--data-dir", default="./data", help="data directory (default ./data)")
    g.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT",
                   help="ask this running broker's group coordinator")
    g.add_argument("--command-config", default=None, metavar="FILE",
                   help="client properties for TLS / SASL (security.protocol, ssl.*, sasl.*)")
    g.add_argument("action", choices=["list", "describe", "delete"], help="what to do")
    g.add_argument("group", nargs="?", help="the consumer group (describe, delete)")
    g.set_defaults(func=cmd_groups)

    pr = sub.add_parser("produce", help="send stdin lines as records")
    with_dir(pr)
    pr.add_argument("topic", help="topic to append to (created when auto-creation is on)")
    pr.add_argument("--partition", type=int, default=None,
                    help="partition of every record (default: by key, else sticky)")
    pr.add_argument("--key-separator", default=None, help="split each line into key and value")
    pr.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                    help="codec of the record batches (default none)")
    pr.add_argument("--linger-ms", type=int, default=5, help="batching delay (default 5)")
    pr.add_argument("--file", default=None, help="read the lines from this file instead of stdin")
    pr.add_argument("--header", action="append", metavar="KEY=VALUE",
                    help="a header on every record, repeatable (kcat -H)")
    pr.add_argument("--acks", default="all", choices=["all", "-1", "1", "0"],
                    help="over the wire: what the broker confirms (default all)")
    pr.add_argument("--batch-size", type=int, default=1 << 20,
                    help="over the wire: largest record batch in bytes (default 1 MiB)")
    pr.set_defaults(func=cmd_produce)

    c = sub.add_parser("consume", help="print records to stdout")
    with_dir(c)
    c.add_argument("topic", help="topic to read")
    c.add_argument("--partition", type=int, default=None, help="only this partition (default: all)")
    c.add_argument("--offset", type=int, default=None, help="start at this offset of each partition")
    c.add_argument("--from-beginning", action="store_true",
                   help="start at the log start (default: only new records)")
    c.add_argument("--max-messages", type=int, default=None, help="stop after this many records")
    c.add_argument("--timeout-ms", type=int, default=1000,
                   help="stop after this long without new records")
    c.add_argument("--print-key", action="store_true", help="print KEY<TAB> before each value")
    c.add_argument("--print-offsets", action="store_true",
                   help="print PARTITION<TAB>OFFSET<TAB>TIMESTAMP<TAB> before each record")
    c.add_argument("--print-headers", action="store_true", help="print k=v,...<TAB> before the key")
    c.add_argument("--format", default=None,
                   help="kcat-style format: %%t topic %%p partition %%o offset %%T timestamp %%k key "
                        "%%s value %%h headers %%K/%%S lengths, \\n \\t (overrides --print-*)")
    c.add_argument("--group", default=None,
                   help="consume as a member of this consumer group (commits its position at the end)")
    c.set_defaults(func=cmd_consume)

    cf = sub.add_parser("configs", help="describe or alter topic and broker configs (kafka-configs.sh)")
    with_dir(cf)
    cf.add_argument("--entity-type", required=True, choices=["topics", "brokers"], help="what to configure")
    cf.add_argument("--entity-name", required=True, help="the topic name, or the broker id")
    cf.add_argument("--describe", action="store_true", help="show the configs (the default)")
    cf.add_argument("--all", action="store_true", help="with --describe: defaults too, not only overrides")
    cf.add_argument("--alter", action="store_true", help="change the configs given below")
    cf.add_argument("--add-config", action="append", metavar="KEY=VALUE",
                    help="with --alter: set this key, repeatable")
    cf.add_argument("--delete-config", action="append", metavar="KEY",
                    help="with --alter: back to the default, repeatable")
    cf.set_defaults(func=cmd_configs)

    d = sub.add_parser("dump-log", help="list the batches of a .log segment (or an index's entries)")
    d.add_argument("file", help="a .log segment, or a .index / .timeindex file")
    d.add_argument("--print-records", action="store_true", help="list the records of each batch")
    d.add_argument("--print-payload", action="store_true", help="with --print-records: keys and values")
    d.set_defaults(func=cmd_dump_log)

    b = sub.add_parser("bench", help="run the storage benchmarks")
    b.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    b.add_argument("--only", action="append", help="run only rows whose name contains this")
    b.add_argument("--json", default="bench-results.json", help="where to write the JSON results")
    b.add_argument("--bench-dir", default=None, help="scratch directory (default: a temp dir)")
    b.set_defaults(func=cmd_bench)

    from .cli_cluster import add_cluster_parser
    from .cli_serve import add_console_parser, add_serve_parser
    add_serve_parser(sub, _parse_kv)
    add_cluster_parser(sub)
    add_console_parser(sub)
    return p


def _os_error_line(e: OSError) -> str:
    """One line for a user's mistake that surfaced as an OSError (file, address, permission)."""
    import errno

    what = e.filename if e.filename is not None else ""
    if e.errno == errno.EADDRINUSE:
        return f"error: cannot listen on {getattr(e, 'address', what) or 'the address'}: address already in use"
    if e.errno == errno.EADDRNOTAVAIL:
        return f"error: cannot listen on {getattr(e, 'address', what) or 'the address'}: not an address of this machine"
    reason = e.strerror or str(e)
    return f"error: {what}: {reason}" if what else f"error: {reason}"


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import EngineError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except EngineError as e:
        if args.debug:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as e:
        if args.debug:
            raise
        print(_os_error_line(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
