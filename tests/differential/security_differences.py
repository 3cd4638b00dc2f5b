"""Where our broker's answers differ from Apache Kafka 4.0's in the security differential tests
(test_security_differential.py): case id -> what differs (Kafka's answer, ours).  Each case listed
is an xfail(strict): it fails once the difference is gone, so this list stays true.

"message only" entries answer the same codes and fields and differ only in error_message text.
"""

from __future__ import annotations

DIFFERS: dict[str, str] = {
    'DescribeAcls': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'CreateAcls': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'DeleteAcls': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'AlterUserScramCredentials': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'ElectLeaders': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'ListPartitionReassignments': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'AlterPartitionReassignments': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.' (top level and per partition)"
    ),
    'acl-AlterPartitionReassignments-no-ALTER': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.' (top level and per partition)"
    ),
    'acl-ElectLeaders-no-ALTER': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'acl-AlterUserScramCredentials-no-ALTER': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'acl-CreateAcls-no-ALTER': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'DescribeAcls-as-alice': (
        "message only: Kafka 'Request Request(<its request dump>) is not authorized.' (its controller's "
        "refusal), ours 'Cluster authorization failed.'"
    ),
    'OffsetFetch-topic': (
        'group without DESCRIBE (GROUP_AUTHORIZATION_FAILED): Kafka answers no topics, ours lists the asked '
        'partitions (offset -1, error 0)'
    ),
    'acl-OffsetFetch-group-denied': (
        'group without DESCRIBE (GROUP_AUTHORIZATION_FAILED): Kafka answers no topics, ours lists the asked '
        'partitions (offset -1, error 0)'
    ),
    'DescribeUserScramCredentials-all': (
        "message only: top-level error_message Kafka null, ours 'Cluster authorization failed.'"
    ),
    'DescribeUserScramCredentials-named': (
        "Kafka: top-level and per-user error_message null and the user's name '' in the result; ours 'Cluster"
        " authorization failed.' both and user 'alice'"
    ),
    'CreateAcls-resource-ANY': (
        "Kafka UNKNOWN_SERVER_ERROR (-1) with no message, ours INVALID_REQUEST (42) 'Invalid resourceType "
        "ANY'"
    ),
    'CreateAcls-operation-ANY': (
        "Kafka UNKNOWN_SERVER_ERROR (-1) with no message, ours INVALID_REQUEST (42) 'Invalid operation ANY'"
    ),
    'CreateAcls-permission-ANY': (
        "Kafka UNKNOWN_SERVER_ERROR (-1) with no message, ours INVALID_REQUEST (42) 'Invalid permissionType "
        "ANY'"
    ),
    'CreateAcls-pattern-MATCH': (
        "Kafka UNKNOWN_SERVER_ERROR (-1) with no message, ours INVALID_REQUEST (42) 'Invalid patternType "
        "MATCH'"
    ),
    'CreateAcls-pattern-ANY': (
        "Kafka UNKNOWN_SERVER_ERROR (-1) with no message, ours INVALID_REQUEST (42) 'Invalid patternType ANY'"
    ),
    'CreateAcls-principal-without-type': (
        "message only: Kafka 'Could not parse principal from `carol` (no colon is present separating the "
        'principal type from the principal name)\', ours "expected a string in format '
        'principalType:principalName but got \'carol\'"'
    ),
    'CreateAcls-principal-empty': (
        "message only: Kafka 'Could not parse principal from `` (no colon is present separating the principal"
        ' type from the principal name)\', ours "expected a string in format principalType:principalName but '
        'got \'\'"'
    ),
    'CreateAcls-principal-empty-name': (
        'principal \'User:\' (empty name): Kafka accepts it (0), ours INVALID_REQUEST (42) "expected a string '
        'in format principalType:principalName but got \'User:\'"'
    ),
}
