"""The CLI's commands over the Kafka protocol (``--bootstrap-server``), like Kafka's own tools.

``python -m engine topics|produce|consume|groups|configs --bootstrap-server HOST:PORT ...`` talk
to a running broker (ours or Apache Kafka) with the project's wire client
(:mod:`engine.client.wire`, :mod:`engine.client.admin`, :mod:`engine.client.group`); the
same commands with ``--data-dir`` of a directory a broker owns go through that broker
(``engine.broker_address``), since its writer lock keeps other writers out.  Output formats are
those of the in-process paths, plus Kafka's Leader / Replicas / Isr columns in ``describe``.

``--command-config FILE``, as Kafka's tools take it: a properties file of client keys for TLS and
SASL (``security.protocol``, ``ssl.truststore.*``, ``ssl.keystore.*``,
``ssl.endpoint.identification.algorithm``, ``sasl.mechanism``, ``sasl.jaas.config``;
engine/client/security.py) that every connection of the command uses (:func:`command_security`).
Other client keys in the file (``client.id``, ``request.timeout.ms``, ...) are ignored, as tools'
own settings; a key that is neither a Kafka client key nor a security key is an error.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from . import _native

__all__ = ["command_security", "configs", "consume", "describe_topics", "format_record", "produce"]

# client keys a --command-config file may hold that the CLI's own flags govern (taken, no effect)
_TOOL_KEYS = frozenset({"client.id", "request.timeout.ms", "retry.backoff.ms", "metadata.max.age.ms",
                        "default.api.timeout.ms", "connections.max.idle.ms", "bootstrap.servers",
                        "retries", "reconnect.backoff.ms", "reconnect.backoff.max.ms"})


def command_security(args: argparse.Namespace):
    """The :class:`~engine.client.security.ClientSecurity` of ``--command-config`` (None
    without the flag, or for PLAINTEXT)."""
    path = getattr(args, "command_config", None)
    if not path:
        return None
    from .client.security import CLIENT_SECURITY_KEYS, ClientSecurity
    from .config import parse_properties
    from .errors import InvalidConfigError
    try:
        with open(path) as f:
            props = parse_properties(f.read(), path)
    except OSError as e:
        raise InvalidConfigError(f"--command-config {path}: {e.strerror or e}") from None
    unknown = sorted(k for k in props if k not in CLIENT_SECURITY_KEYS and k not in _TOOL_KEYS)
    if unknown:
        raise InvalidConfigError(f"--command-config {path}: unknown client key(s) {', '.join(unknown)} "
                                 "(security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config, ...)")
    return ClientSecurity.from_config({k: v for k, v in props.items() if k in CLIENT_SECURITY_KEYS})


def format_record(fmt: str, topic: str, partition: int, offset: int, timestamp: int,
                  key, value, headers) -> bytes:
    """kcat's ``-f`` tokens: %t topic, %p partition, %o offset, %T timestamp, %k key, %s value,
    %K / %S key / value length (-1 for null), %h headers (k=v,...), %% a percent; \\n \\t escapes."""
    out = bytearray()
    i, n = 0, len(fmt)
    while i < n:
        c = fmt[i]
        if c == "\\" and i + 1 < n and fmt[i + 1] in "nt\\":
            out += {"n": b"\n", "t": b"\t", "\\": b"\\"}[fmt[i + 1]]
            i += 2
            continue
        if c == "%" and i + 1 < n:
            t = fmt[i + 1]
            i += 2
            if t == "t":
                out += topic.encode()
            elif t == "p":
                out += str(partition).encode()
            elif t == "o":
                out += str(offset).encode()
            elif t == "T":
                out += str(timestamp).encode()
            elif t == "k":
                out += key if key is not None else b""
            elif t == "s":
                out += value if value is not None else b""
            elif t == "K":
                out += str(-1 if key is None else len(key)).encode()
            elif t == "S":
                out += str(-1 if value is None else len(value)).encode()
            elif t == "h":
                out += b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in headers)
            elif t == "%":
                out += b"%"
            else:
                out += b"%" + t.encode()
            continue
        out += c.encode()
        i += 1
    return bytes(out)


# -- topics ---------------------------------------------------------------------------------
def describe_topics(admin, names: list[str]) -> None:
    """kafka-topics.sh --describe: partitions with leader, replicas, ISR, and their offsets."""
    for name in names:
        d = admin.describe_topic(name)
        overrides = ",".join(f"{k}={v}" for k, v in sorted(d.overrides.items()))
        print(f"Topic: {d.name}\tTopicId: {d.topic_id or '-'}\tPartitionCount: {len(d.partitions)}"
              f"\tReplicationFactor: {d.replication_factor}\tConfigs: {overrides}")
        for p in d.partitions:
            print(f"\tTopic: {d.name}\tPartition: {p.partition}\tLeader: {p.leader}"
                  f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
                  f"\tLogStartOffset: {p.log_start_offset}\tHighWatermark: {p.high_watermark}")


# -- configs ----------------------------------------------------------------------------------
def configs(args: argparse.Namespace, bootstrap: str, parse_kv) -> int:
    """Like kafka-configs.sh --describe / --alter for topics and brokers."""
    from .client.admin import WireAdmin

    resource = "topic" if args.entity_type == "topics" else "broker"
    with WireAdmin(bootstrap, security=command_security(args)) as admin:
        if args.alter:
            admin.alter_configs(resource, args.entity_name, set=parse_kv(args.add_config),
                                delete=args.delete_config or ())
            print(f"Completed updating config for {args.entity_type[:-1]} {args.entity_name}.")
            return 0
        entries = admin.describe_configs(resource, args.entity_name)
        shown = [c for c in entries if args.all or c.source.startswith("DYNAMIC")]
        print(f"{'Dynamic configs' if not args.all else 'All configs'} for {args.entity_type[:-1]} "
              f"{args.entity_name} are:")
        for c in sorted(shown, key=lambda c: c.name):
            value = "null" if c.value is None else ("(sensitive)" if c.sensitive else c.value)
            print(f"  {c.name}={value} sensitive={str(c.sensitive).lower()} source={c.source}")
    return 0


# -- produce ----------------------------------------------------------------------------------
def produce(args: argparse.Namespace, bootstrap: str, lines, progress) -> int:
    """Lines (``key<sep>value`` with --key-separator) as records; batches of up to --batch-size
    bytes per partition, keys partitioned by murmur2 as Kafka's clients do, keyless records to a
    random partition per batch (sticky)."""
    from .client.wire import WireClient
    from .records import codec_id

    acks = {"all": -1, "-1": -1, "1": 1, "0": 0}[args.acks]
    codec = codec_id(args.compression or "none")
    sep = args.key_separator.encode() if args.key_separator else None
    headers = [(k, v.encode()) for k, v in (h.split("=", 1) for h in (args.header or []))]
    n = 0
    with WireClient(bootstrap, client_id="kafka-engine-cli", security=command_security(args)) as client:
        count = client.partition_count(args.topic, auto_create=True)
        builders: dict[int, _native.BatchBuilder] = {}
        sticky = random.randrange(count)

        def send(p: int) -> None:
            b = builders.pop(p)
            client.produce(args.topic, p, [b.build(codec, 0)], acks=acks)

        for line in lines:
            line = line.rstrip(b"\r\n")
            key = None
            if sep is not None and sep in line:
                key, line = line.split(sep, 1)
            if args.partition is not None:
                p = args.partition
            elif key is not None:
                p = _native.default_partition(key, count)
            else:
                p = sticky
            b = builders.get(p)
            if b is None:
                b = builders[p] = _native.BatchBuilder()
            b.append(line, key, headers, int(time.time() * 1000))
            n += 1
            progress.update()
            if b.size_in_bytes >= args.batch_size:
                send(p)
                if p == sticky and key is None and args.partition is None:
                    sticky = random.randrange(count)
        for p in list(builders):
            send(p)
    print(f"Produced {n} records to {args.topic}.", file=sys.stderr)
    return 0


# -- consume ----------------------------------------------------------------------------------
def consume(args: argparse.Namespace, bootstrap: str, emit) -> int:
    """Fetch loop over the partitions (or a group's assignment with --group); ``emit`` prints."""
    from .client.wire import EARLIEST, LATEST, WireClient
    from .errors import ErrorCode

    security = command_security(args)
    client = WireClient(bootstrap, client_id="kafka-engine-cli", security=security)
    member = None
    try:
        count = client.partition_count(args.topic)
        if args.group:
            from .client.group import GroupMember, WireTransport
            member = GroupMember(WireTransport(bootstrap, client_id="kafka-engine-cli", security=security), args.group,
                                 partitions_for=lambda t: client.partition_count(t))
            member.subscribe([args.topic])
            positions = _group_positions(client, member, args)
        else:
            parts = [args.partition] if args.partition is not None else list(range(count))
            if args.offset is not None:
                positions = {(args.topic, p): args.offset for p in parts}
            else:
                when = EARLIEST if args.from_beginning else LATEST
                got = client.list_offsets({(args.topic, p): when for p in parts})
                positions = {tp: off for tp, (off, _ts) in got.items()}
        n = 0
        idle_deadline = time.monotonic() + args.timeout_ms / 1000.0
        while args.max_messages is None or n < args.max_messages:
            if member is not None:
                member.poll_tick()
                if member.needs_rejoin:
                    _commit(member, positions)
                    positions = _group_positions(client, member, args)
            got_any = False
            for (topic, p), pos in sorted(positions.items()):
                res = client.fetch(topic, p, pos, max_wait_ms=100 if len(positions) > 1 else 200)
                if res.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:     # reset as auto.offset.reset
                    when = EARLIEST if args.from_beginning else LATEST
                    positions[(topic, p)] = client.list_offsets({(topic, p): when})[(topic, p)][0]
                    continue
                records, _end = _native.decode_batches(res.records, 0, -1, True, True)
                for off, ts, key, value, headers in records:
                    if off < pos:
                        continue
                    if args.max_messages is not None and n >= args.max_messages:
                        break
                    emit(topic, p, off, ts, key, value, headers)
                    positions[(topic, p)] = off + 1
                    n += 1
                    got_any = True
            if got_any:
                idle_deadline = time.monotonic() + args.timeout_ms / 1000.0
            elif time.monotonic() > idle_deadline:
                break
        if member is not None:
            _commit(member, positions)
    finally:
        if member is not None:
            member.close()
        client.close()
    print(f"Processed a total of {n} messages", file=sys.stderr)
    return 0


def _group_positions(client, member, args) -> dict:
    """Join, then start each assigned partition at its committed offset (else the reset point)."""
    from .client.wire import EARLIEST, LATEST

    assigned = member.join()
    committed = member.committed(assigned)
    missing = [tp for tp in assigned if committed.get(tp, -1) < 0]
    reset = client.list_offsets({tp: EARLIEST if args.from_beginning else LATEST for tp in missing}) \
        if missing else {}
    return {tp: committed[tp] if tp not in reset else reset[tp][0] for tp in assigned}


def _commit(member, positions: dict) -> None:
    from .errors import CommitFailedError
    try:
        member.commit({tp: (off, None) for tp, off in positions.items()})
    except CommitFailedError as e:
        print(f"warning: {e}", file=sys.stderr)
