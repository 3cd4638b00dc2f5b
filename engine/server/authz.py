"""Authorized operations as Kafka answers them with no authorizer configured.

Kafka without ``authorizer.class.name`` allows every operation; where a request asks for the
operations the caller may perform (Metadata v8+ ``include_topic_authorized_operations`` /
``include_cluster_authorized_operations``, DescribeCluster, DescribeGroups v3+), it answers the
bitfield of every operation the resource type supports (``AclEntry.supportedOperations``), and
``Integer.MIN_VALUE`` when the request did not ask.
"""

from __future__ import annotations

# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12
OMITTED = -2147483648
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))        # 3576
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))                 # 3400
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))        # 8096
