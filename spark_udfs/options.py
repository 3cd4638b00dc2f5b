"""Options of the ``kafka-engine`` Spark data source, parsed and checked on the driver.

Contract: :func:`parse_options` turns Spark's option map (keys compared
case-insensitively -- Spark hands them over lower-cased --, values strings) into a frozen, picklable
:class:`ReadOptions`, or raises :class:`engine.errors.InvalidConfigError`
naming the offending option.  Names and meanings are those of Spark's Kafka
source (``subscribe``, ``startingOffsets``, ``failOnDataLoss``, ...).  The
source reads either a data directory (``path``) or, the network fallback, a
broker (``kafka.bootstrap.servers``): exactly one of the two.  Of the Kafka
consumer settings (``kafka.*``) only those that mean something here are
accepted (``kafka.check.crcs``, ``kafka.isolation.level``, and with a
broker ``kafka.max.partition.fetch.bytes``, ``kafka.request.timeout.ms``,
``kafka.client.id``); others are refused by name.  With both, ``path`` lists
the data directories of the brokers on this machine (``local_dirs``; the data
source checks that each is one at load(), :mod:`spark_udfs.locality`).
Nothing here touches the data directory or the network: offsets are resolved
by :mod:`spark_udfs.planning`.  Imports nothing of spark_udfs: the lowest module.

Offset specs (``startingOffsets`` / ``endingOffsets``) are kept as
:class:`OffsetSpec`: ``kind`` is "earliest", "latest" or "json"; for "json",
``per_partition`` maps (topic, partition) -> offset, with Kafka/Spark's
-2 = earliest and -1 = latest.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from engine.errors import InvalidConfigError

__all__ = ["EARLIEST", "LATEST", "OffsetSpec", "ReadOptions", "parse_options", "KNOWN_OPTIONS"]

EARLIEST = -2
LATEST = -1

#: lower-cased name -> the spelling used in messages and docs.
KNOWN_OPTIONS = {n.lower(): n for n in (
    "path",
    "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets",
    "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "minPartitions", "includeHeaders",
    "maxOffsetsPerTrigger",
    "maxRecordsPerBatch",
    "kafka.check.crcs", "kafka.isolation.level",
    "kafka.bootstrap.servers", "kafka.max.partition.fetch.bytes", "kafka.request.timeout.ms",
    "kafka.client.id",
)}

DEFAULT_MAX_RECORDS_PER_BATCH = 65536


@dataclass(frozen=True)
class OffsetSpec:
    kind: str                                   # "earliest" | "latest" | "json"
    per_partition: dict = field(default_factory=dict)  # {(topic, partition): offset}


@dataclass(frozen=True)
class ReadOptions:
    path: str | None
    subscribe: tuple | None = None              # topic names
    subscribe_pattern: str | None = None        # regex, fullmatch on topic names
    assign: dict | None = None                  # {topic: (partitions, ...)}
    starting: OffsetSpec | None = None          # None: the query kind's default
    ending: OffsetSpec | None = None
    starting_timestamp: int | None = None       # ms, every partition
    ending_timestamp: int | None = None
    starting_by_timestamp: dict | None = None   # {(topic, partition): ms}
    ending_by_timestamp: dict | None = None
    timestamp_strategy: str = "error"           # startingOffsetsByTimestampStrategy: error | latest
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH
    check_crcs: bool = True
    read_committed: bool = False                # kafka.isolation.level=read_committed
    bootstrap_servers: str | None = None        # the network fallback instead of path
    local_dirs: tuple = ()                      # with bootstrap_servers: local brokers' data dirs
    max_partition_fetch_bytes: int = 1048576    # Kafka consumer's default
    request_timeout_ms: int = 30000
    client_id: str = "kafka-engine-spark"

    @property
    def source(self) -> str:
        """What is read, for messages: the data directory or the broker."""
        return self.path if self.path else f"the broker at {self.bootstrap_servers}"


def _bool(name: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise InvalidConfigError(f"option {name!r} must be 'true' or 'false', got {value!r}")


def unknown_option(name: str, known: dict[str, str], what: str) -> InvalidConfigError:
    """The error for an option not in `known` (lower-cased -> spelling), with a near match."""
    near = difflib.get_close_matches(str(name).lower(), known, n=1)
    hint = f"did you mean {known[near[0]]!r}? " if near else ""
    return InvalidConfigError(f"unknown option {name!r} for the kafka-engine {what} ({hint}"
                              f"supported: {', '.join(sorted(known.values()))})")


def int_option(name: str, value, minimum: int = 1) -> int:
    """An integer option >= `minimum`; InvalidConfigError naming the option otherwise."""
    what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    try:
        n = int(str(value).strip())
    except ValueError:
        raise InvalidConfigError(f"option {name!r} must be {what}, got {value!r}") from None
    if n < minimum:
        raise InvalidConfigError(f"option {name!r} must be {what}, got {value!r}")
    return n


def _positive_int(name: str, value: str) -> int:
    return int_option(name, value, 1)


def _timestamp(name: str, value: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise InvalidConfigError(
            f"option {name!r} must be a timestamp in milliseconds since the epoch, got {value!r}") from None
    if n < 0:
        raise InvalidConfigError(f"option {name!r} must be >= 0, got {value!r}")
    return n


def _json_object(name: str, value: str) -> dict:
    try:
        obj = json.loads(value)
    except ValueError as e:
        raise InvalidConfigError(f"option {name!r} is not valid JSON ({e}): {value!r}") from None
    if not isinstance(obj, dict):
        raise InvalidConfigError(f"option {name!r} must be a JSON object, got {value!r}")
    return obj


def _per_partition(name: str, value: str) -> dict:
    """{"topic": {"0": n, ...}, ...} -> {(topic, 0): n}."""
    out = {}
    for topic, parts in _json_object(name, value).items():
        if not isinstance(parts, dict):
            raise InvalidConfigError(f"option {name!r}: topic {topic!r} must map to an object "
                                     f"of partition -> number, got {parts!r}")
        for p, n in parts.items():
            try:
                pi = int(p)
            except ValueError:
                raise InvalidConfigError(f"option {name!r}: {p!r} of topic {topic!r} "
                                         "is not a partition number") from None
            if not isinstance(n, int) or isinstance(n, bool):
                raise InvalidConfigError(f"option {name!r}: {topic}-{pi} must map to an integer, got {n!r}")
            out[(topic, pi)] = n
    return out


def _offset_spec(name: str, value: str) -> OffsetSpec:
    v = str(value).strip()
    if v.lower() in ("earliest", "latest"):
        return OffsetSpec(v.lower())
    if v.startswith("{"):
        pp = _per_partition(name, v)
        for (t, p), n in pp.items():
            if n < EARLIEST:
                raise InvalidConfigError(f"option {name!r}: offset {n} of {t}-{p} is invalid "
                                         "(use >= 0, -2 for earliest or -1 for latest)")
        return OffsetSpec("json", pp)
    raise InvalidConfigError(f"option {name!r} must be 'earliest', 'latest' or a JSON object "
                             f'like {{"topic":{{"0":23}}}}, got {value!r}')


def parse_options(options, *, streaming: bool | None = False) -> ReadOptions:
    """Check Spark's option map and return :class:`ReadOptions` (see the module docstring).

    `streaming`: True/False add the rules of streaming/batch queries; None
    checks only what both share (the schema is asked before the kind is known).
    """
    opts = {}
    for k, v in dict(options).items():
        lk = str(k).lower()
        if lk not in KNOWN_OPTIONS:
            if lk.startswith("kafka."):
                raise InvalidConfigError(
                    f"option {k!r} is not supported by the kafka-engine source: it decodes record "
                    "batches itself, so this consumer setting does not apply "
                    f"(supported: {', '.join(sorted(KNOWN_OPTIONS.values()))})")
            raise unknown_option(k, KNOWN_OPTIONS, "source")
        opts[lk] = v

    path = opts.get("path")
    servers = str(opts.get("kafka.bootstrap.servers") or "").strip()
    if not path and not servers:
        raise InvalidConfigError("option 'path' (the data directory) or 'kafka.bootstrap.servers' "
                                 "(a broker) is required, "
                                 "e.g. spark.read.format('kafka-engine').option('path', '/data')")
    local_dirs: tuple = ()
    if path and servers:      # a cluster: these local data directories where they hold an in-sync copy
        local_dirs = tuple(d.strip() for d in str(path).split(",") if d.strip())
        path = None             # (that each is a broker's data directory: spark_udfs.locality)

    strategies = [n for n in ("subscribe", "subscribepattern", "assign") if n in opts]
    if len(strategies) != 1:
        raise InvalidConfigError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be given, got "
            + (", ".join(repr(KNOWN_OPTIONS[s]) for s in strategies) or "none"))
    kw: dict = {"path": str(path) if path else None, "local_dirs": local_dirs}
    if servers:
        kw["bootstrap_servers"] = servers
    if "kafka.max.partition.fetch.bytes" in opts:
        kw["max_partition_fetch_bytes"] = _positive_int("kafka.max.partition.fetch.bytes",
                                                        opts["kafka.max.partition.fetch.bytes"])
    if "kafka.request.timeout.ms" in opts:
        kw["request_timeout_ms"] = _positive_int("kafka.request.timeout.ms", opts["kafka.request.timeout.ms"])
    if "kafka.client.id" in opts:
        kw["client_id"] = str(opts["kafka.client.id"])
    if "subscribe" in opts:
        topics = tuple(t.strip() for t in str(opts["subscribe"]).split(",") if t.strip())
        if not topics:
            raise InvalidConfigError("option 'subscribe' must name at least one topic")
        kw["subscribe"] = topics
    elif "subscribepattern" in opts:
        pat = str(opts["subscribepattern"])
        try:
            re.compile(pat)
        except re.error as e:
            raise InvalidConfigError(f"option 'subscribePattern' is not a valid regex ({e}): {pat!r}") from None
        kw["subscribe_pattern"] = pat
    else:
        assign = {}
        for t, parts in _json_object("assign", str(opts["assign"])).items():
            if (not isinstance(parts, list) or not parts
                    or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)):
                raise InvalidConfigError(f"option 'assign': topic {t!r} must map to a non-empty list "
                                         f"of partition numbers, got {parts!r}")
            assign[t] = tuple(sorted(set(parts)))
        if not assign:
            raise InvalidConfigError("option 'assign' must name at least one topic")
        kw["assign"] = assign

    if "startingoffsets" in opts:
        kw["starting"] = _offset_spec("startingOffsets", opts["startingoffsets"])
    if "endingoffsets" in opts:
        if streaming:
            raise InvalidConfigError("option 'endingOffsets' is not allowed for streaming queries")
        kw["ending"] = _offset_spec("endingOffsets", opts["endingoffsets"])
    if "startingtimestamp" in opts:
        kw["starting_timestamp"] = _timestamp("startingTimestamp", opts["startingtimestamp"])
    if "endingtimestamp" in opts:
        if streaming:
            raise InvalidConfigError("option 'endingTimestamp' is not allowed for streaming queries")
        kw["ending_timestamp"] = _timestamp("endingTimestamp", opts["endingtimestamp"])
    for key, attr, opt in (("startingoffsetsbytimestamp", "starting_by_timestamp", "startingOffsetsByTimestamp"),
                           ("endingoffsetsbytimestamp", "ending_by_timestamp", "endingOffsetsByTimestamp")):
        if key in opts:
            if streaming and attr == "ending_by_timestamp":
                raise InvalidConfigError(f"option {opt!r} is not allowed for streaming queries")
            pp = _per_partition(opt, opts[key])
            for (t, p), n in pp.items():
                if n < 0:
                    raise InvalidConfigError(f"option {opt!r}: timestamp {n} of {t}-{p} must be >= 0")
            kw[attr] = pp
    if "startingoffsetsbytimestampstrategy" in opts:
        s = str(opts["startingoffsetsbytimestampstrategy"]).strip().lower()
        if s not in ("error", "latest"):
            raise InvalidConfigError("option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                                     f"'latest', got {opts['startingoffsetsbytimestampstrategy']!r}")
        kw["timestamp_strategy"] = s

    if streaming is False:
        # Spark's rules for batch queries: the range must be bounded by what exists.
        st = kw.get("starting")
        if st is not None and (st.kind == "latest" or LATEST in st.per_partition.values()):
            raise InvalidConfigError("option 'startingOffsets': 'latest' (or -1) is not allowed "
                                     "for batch queries")
        en = kw.get("ending")
        if en is not None and (en.kind == "earliest" or EARLIEST in en.per_partition.values()):
            raise InvalidConfigError("option 'endingOffsets': 'earliest' (or -2) is not allowed "
                                     "for batch queries")

    if "failondataloss" in opts:
        kw["fail_on_data_loss"] = _bool("failOnDataLoss", opts["failondataloss"])
    if "minpartitions" in opts:
        kw["min_partitions"] = _positive_int("minPartitions", opts["minpartitions"])
    if "includeheaders" in opts:
        kw["include_headers"] = _bool("includeHeaders", opts["includeheaders"])
    if "maxoffsetspertrigger" in opts:
        kw["max_offsets_per_trigger"] = _positive_int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"])
    if "maxrecordsperbatch" in opts:
        kw["max_records_per_batch"] = _positive_int("maxRecordsPerBatch", opts["maxrecordsperbatch"])
    if "kafka.check.crcs" in opts:
        kw["check_crcs"] = _bool("kafka.check.crcs", opts["kafka.check.crcs"])
    if "kafka.isolation.level" in opts:
        level = str(opts["kafka.isolation.level"]).strip().lower()
        kw["read_committed"] = level == "read_committed"
        if level not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError("option 'kafka.isolation.level' must be 'read_uncommitted' or "
                                     f"'read_committed', got {opts['kafka.isolation.level']!r}")
    return ReadOptions(**kw)
