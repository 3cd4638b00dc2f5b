"""Topic metadata for the embedded (single-node) default: which topics exist,
their ids, partition counts and config overrides.

Kafka keeps this in ZooKeeper or KRaft, not in the log directory; the cluster
work will put a ZooKeeper-backed store behind the same small interface
(:class:`MetadataStore`).  The local store is one JSON document,
``<data dir>/engine-topics.json``, always replaced atomically (temp file,
fsync, rename, fsync dir), plus Kafka's own ``meta.properties`` at the top of
the data directory and ``partition.metadata`` in each partition directory.

Format of ``engine-topics.json``::

    {"version": 1,
     "producer_id_block_end": <int>,   # producer ids below it may be in use
     "topics": {"<name>": {"topic_id": "<22-char base64 uuid>",
                           "partitions": <int>,
                           "config": {"<kafka key>": <value>, ...}}}}

Not thread-safe by itself: the Engine serialises admin operations.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import CorruptRecordError, InvalidConfigError, InvalidTopicError
from .storage.checkpoint import write_atomic as atomic_write

__all__ = ["LocalMetadataStore", "MetadataStore", "TopicMetadata", "validate_topic_name"]

_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def validate_topic_name(name: str) -> None:
    """Kafka's rule for a topic name (InvalidTopicError otherwise)."""
    if not isinstance(name, str) or not _TOPIC_RE.match(name) or name in (".", ".."):
        raise InvalidTopicError(
            f"invalid topic name {name!r}: use 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'")


TOPICS_FILE = "engine-topics.json"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"


@dataclass
class TopicMetadata:
    name: str
    topic_id: str
    partitions: int
    config: dict[str, Any] = field(default_factory=dict)


class MetadataStore(Protocol):
    def topics(self) -> dict[str, TopicMetadata]: ...
    def put_topic(self, topic: TopicMetadata) -> None: ...
    def remove_topic(self, name: str) -> None: ...
    def reserve_producer_ids(self, count: int) -> int: ...


def new_topic_id() -> str:
    """A Kafka topic id: a random UUID, URL-safe base64 without padding (22 chars), never zero."""
    while True:
        raw = uuid.uuid4().bytes
        if any(raw):
            return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def topic_uuid(topic_id: str | None) -> uuid.UUID | None:
    """A topic id as stored and printed (unpadded URL-safe base64) as a UUID; None when there is
    none or it is not one."""
    if not topic_id:
        return None
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))
    except (ValueError, TypeError):
        return None


def read_meta_properties(data_dir: str) -> dict[str, str]:
    """``<data_dir>/meta.properties`` as a dict ({} when absent)."""
    props: dict[str, str] = {}
    try:
        with open(os.path.join(data_dir, META_PROPERTIES)) as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    props[k] = v
    except FileNotFoundError:
        pass
    return props


def _stored_node_id(props: dict[str, str]) -> int | None:
    """The broker a data directory belongs to: ``node.id`` (Kafka's v1 file) or ``broker.id`` (v0)."""
    raw = props.get("node.id", props.get("broker.id"))
    try:
        return None if raw is None else int(raw)
    except ValueError:
        return None


class LocalMetadataStore:
    """The JSON-file metadata store of one data directory."""

    def __init__(self, data_dir: str, read_only: bool = False, broker_id: int | None = None):
        """`broker_id`: this directory's broker in a cluster (checked against and written to
        ``meta.properties`` as Kafka does); None for the single-node default."""
        self.data_dir = data_dir
        self.read_only = read_only
        self._path = os.path.join(data_dir, TOPICS_FILE)
        self._topics: dict[str, TopicMetadata] = {}
        self._producer_id_block_end = 0  # ids below it may have been handed out before
        self.cluster_id: str | None = None
        self.node_id: int | None = None
        self.reload()
        if not read_only:
            self._ensure_meta_properties(broker_id)
        else:
            props = read_meta_properties(data_dir)
            self.cluster_id = props.get("cluster.id")
            self.node_id = _stored_node_id(props)

    def reload(self) -> None:
        try:
            with open(self._path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            self._topics = {}
            return
        try:
            doc = json.loads(raw)
            if doc.get("version") != 1:
                raise ValueError(f"unknown version {doc.get('version')!r}")
            self._topics = {
                name: TopicMetadata(name, t["topic_id"], int(t["partitions"]), dict(t.get("config", {})))
                for name, t in doc["topics"].items()
            }
            self._producer_id_block_end = int(doc.get("producer_id_block_end", 0))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptRecordError(f"unreadable topic metadata ({e})", self._path) from None

    def _ensure_meta_properties(self, broker_id: int | None) -> None:
        path = os.path.join(self.data_dir, META_PROPERTIES)
        props = read_meta_properties(self.data_dir)
        stored = _stored_node_id(props)
        if "cluster.id" not in props:
            props = {"version": "1", "cluster.id": new_topic_id(),
                     "node.id": str(0 if broker_id is None else broker_id)}
            body = "#\n#" + "\n".join(f"{k}={v}" for k, v in props.items()) + "\n"
            atomic_write(path, body.encode())
            stored = _stored_node_id(props)
        elif broker_id is not None and stored is not None and stored != broker_id:
            # Kafka's check (InconsistentBrokerIdException): a data directory belongs to one broker
            raise InvalidConfigError(
                f"configured broker.id {broker_id} doesn't match stored node.id {stored} in {path}: "
                "if you moved your data, configure the broker.id it was written with; to start a new "
                "broker, give it an empty data directory")
        self.cluster_id = props["cluster.id"]
        self.node_id = stored

    def adopt_cluster_id(self, cluster_id: str, node_id: int) -> None:
        """``meta.properties`` takes a cluster's id and this broker's id (cluster mode)."""
        body = f"#\n#\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
        atomic_write(os.path.join(self.data_dir, META_PROPERTIES), body.encode())
        self.cluster_id = cluster_id

    def topics(self) -> dict[str, TopicMetadata]:
        return dict(self._topics)

    def _save(self) -> None:
        doc = {
            "version": 1,
            "producer_id_block_end": self._producer_id_block_end,
            "topics": {
                t.name: {"topic_id": t.topic_id, "partitions": t.partitions, "config": t.config}
                for t in sorted(self._topics.values(), key=lambda t: t.name)
            },
        }
        atomic_write(self._path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def put_topic(self, topic: TopicMetadata) -> None:
        self._topics[topic.name] = topic
        self._save()

    def reserve_producer_ids(self, count: int) -> int:
        """Reserve `count` new producer ids; returns the first.  Persisted before it returns,
        so ids are never handed out twice, even across restarts (Kafka's producer-id blocks)."""
        first = self._producer_id_block_end
        self._producer_id_block_end = first + count
        self._save()
        return first

    def remove_topic(self, name: str) -> None:
        self._topics.pop(name, None)
        self._save()


def write_partition_metadata(partition_dir: str, topic_id: str) -> None:
    """Kafka's ``partition.metadata``: ``version: 0`` and the topic id."""
    atomic_write(os.path.join(partition_dir, PARTITION_METADATA),
                 f"version: 0\ntopic_id: {topic_id}\n".encode())
