"""The APIs this broker serves, as tables (no I/O): their keys (:class:`ApiKey`, Kafka's
``ApiKeys``), names (``API_NAMES``), the version ranges served (``SUPPORTED``) and the first
flexible version of each (``FLEXIBLE_FROM``, :func:`is_flexible`); and the one rule every request
body shares, that bytes after it are ignored (:func:`ignore_trailing`, logged by API name).

Which versions we serve follows the "capped variant" of docs: the Kafka 4.0.0 minima, maxima
capped where the clients we test with stop anyway.  Produce 0–2 are advertised (old librdkafka
feature probes look for Produce v0) but answered with UNSUPPORTED_VERSION, as Kafka 4 does.
The tables are read-only after import; safe from any thread.
"""

from __future__ import annotations

import logging

from .primitives import Reader

log = logging.getLogger("engine.protocol")

__all__ = ["API_NAMES", "ApiKey", "FLEXIBLE_FROM", "SUPPORTED", "ignore_trailing", "is_flexible"]


class ApiKey:
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    CREATE_PARTITIONS = 37
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    # admin APIs (engine/server/admin_handlers.py)
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_TOPIC_PARTITIONS = 75
    # transactions (engine/server/txn_handlers.py)
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    # SASL and SCRAM credentials (engine/server/sasl_handlers.py, scram_handlers.py)
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    # client quotas (engine/server/quota_handlers.py)
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49


API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions",
             19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId",
             23: "OffsetForLeaderEpoch",
             32: "DescribeConfigs", 37: "CreatePartitions", 44: "IncrementalAlterConfigs",
             60: "DescribeCluster", 61: "DescribeProducers",
             8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
             13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups", 42: "DeleteGroups",
             47: "OffsetDelete",
             29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 33: "AlterConfigs",
             35: "DescribeLogDirs", 43: "ElectLeaders", 45: "AlterPartitionReassignments",
             46: "ListPartitionReassignments", 65: "DescribeTransactions", 66: "ListTransactions",
             75: "DescribeTopicPartitions",
             24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
             28: "TxnOffsetCommit", 17: "SaslHandshake", 36: "SaslAuthenticate",
             50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials",
             48: "DescribeClientQuotas", 49: "AlterClientQuotas"}

# api_key -> (min, max) we serve
SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),     # v12 needs transaction.version 2 (KIP-890 part 2): not served
    ApiKey.FETCH: (4, 16),       # v17 is KIP-853's directory id (KRaft voters): not served
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (0, 13),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),   # engine/server/producer_handlers.py
    # consumer groups (engine/server/group_handlers.py)
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    # admin APIs (engine/server/admin_handlers.py), Kafka 4.0's ranges
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),      # (these two: engine/server/reassign_handlers.py)
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    # transactions (engine/server/txn_handlers.py), Kafka 4.0's ranges
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    # SASL (engine/server/sasl_handlers.py) and SCRAM credentials, Kafka 4.0's ranges
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # client quotas (engine/server/quota_handlers.py), Kafka 4.0's ranges
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
}

# api_key -> first flexible version (Kafka 4.x, unchanged)
FLEXIBLE_FROM = {0: 9, 1: 12, 2: 6, 3: 9, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 32: 4, 37: 2, 44: 1,
                 60: 0, 61: 0, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3, 42: 2, 47: 1 << 15,
                 29: 2, 30: 2, 31: 2, 33: 2, 35: 2, 43: 2, 45: 0, 46: 0, 65: 0, 66: 0, 75: 0,
                 24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 17: 1 << 15, 36: 2, 50: 0, 51: 0, 48: 1, 49: 1}


def is_flexible(api_key: int, version: int) -> bool:
    return version >= FLEXIBLE_FROM[api_key]


def ignore_trailing(r: Reader, api_key: int, version: int) -> None:
    """Bytes after a complete request body are ignored, as Kafka ignores them (a debug line)."""
    extra = r.rest()
    if extra:
        log.debug("%s v%d: ignored %d bytes after the request body",
                  API_NAMES.get(api_key, api_key), version, extra)
