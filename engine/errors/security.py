"""Errors of security: ACL authorization, SASL (mechanisms, state, failed
authentication), SCRAM credentials, TLS (configuration, handshakes, principal mapping),
stored ACLs, client quotas and authorizer settings, and the controller mutation quota.

Every class here is re-exported by :mod:`engine.errors`, which is where it is
imported from and the module it reports (``__module__``)."""

from __future__ import annotations

from .admin import InvalidConfigError
from .base import EngineError, KafkaApiError
from .codes import ErrorCode


class TopicAuthorizationError(KafkaApiError):
    """Kafka's TOPIC_AUTHORIZATION_FAILED: the caller may not do this to the topic."""

    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationError(KafkaApiError):
    """Kafka's GROUP_AUTHORIZATION_FAILED: the caller may not do this to the group."""

    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationError(KafkaApiError):
    """Kafka's CLUSTER_AUTHORIZATION_FAILED: the caller may not do this to the cluster."""

    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class TransactionalIdAuthorizationError(KafkaApiError):
    """Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""

    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class SecurityDisabledError(KafkaApiError):
    """ACL requests to a broker without an authorizer."""

    code = ErrorCode.SECURITY_DISABLED


class ThrottlingQuotaExceededError(KafkaApiError):
    """CreateTopics / CreatePartitions / DeleteTopics over the caller's controller_mutation_rate
    (KIP-599): the topic is refused, retriable after the response's throttle time."""

    code = ErrorCode.THROTTLING_QUOTA_EXCEEDED


class UnsupportedSaslMechanismError(KafkaApiError):
    """The client asked for a SASL mechanism the listener does not enable
    (``sasl.enabled.mechanisms``)."""

    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(KafkaApiError):
    """A SASL message out of turn: a second handshake, a token after the exchange ended."""

    code = ErrorCode.ILLEGAL_SASL_STATE


class SaslAuthenticationError(KafkaApiError):
    """Authentication failed: wrong password, unknown user, bad proof or malformed token."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class ResourceNotFoundError(KafkaApiError):
    """The named resource does not exist (e.g. deleting a SCRAM credential never set)."""

    code = ErrorCode.RESOURCE_NOT_FOUND


class DuplicateResourceError(KafkaApiError):
    """One request names the same resource twice (e.g. a user in AlterUserScramCredentials)."""

    code = ErrorCode.DUPLICATE_RESOURCE


class UnacceptableCredentialError(KafkaApiError, ValueError):
    """A credential outside what the broker accepts (empty user, iterations out of range)."""

    code = ErrorCode.UNACCEPTABLE_CREDENTIAL


class JaasConfigError(InvalidConfigError):
    """A ``sasl.jaas.config`` value that does not parse as Kafka's JAAS line
    (``<LoginModule> <flag> key=value ... ;``); the message names what is wrong."""


class ScramCredentialFormatError(InvalidConfigError):
    """A stored SCRAM credential that is not Kafka's
    ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` text."""


class SslConfigError(InvalidConfigError):
    """An ``ssl.*`` setting that cannot make a TLS context: a missing or unreadable key store or
    trust store, a wrong or missing ``ssl.key.password``, an unsupported store type (JKS), a
    protocol below TLSv1.2, no usable cipher suite.  ``key`` is the configuration key at fault
    (with its ``listener.name.<l>.`` prefix where the value came from one)."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")

    def __reduce__(self):
        return (type(self), (self.key, self.message), self.__dict__)


class AuthorizerConfigError(InvalidConfigError):
    """An authorizer setting the broker cannot take: an ``authorizer.class.name`` that names
    no authorizer this broker has, or an ``allow.everyone.if.no.acl.found`` that is not a
    boolean.  ``key`` is the configuration key at fault."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")

    def __reduce__(self):
        return (type(self), (self.key, self.message), self.__dict__)


class AclFormatError(InvalidConfigError):
    """A stored ACL that is not Kafka's form: the broker's ACL file, or a ZooKeeper
    ``/kafka-acl...`` node or ACL change notification; the message names the file or node."""


class QuotaFormatError(InvalidConfigError):
    """A stored client quota that is not Kafka's form: ``client-quotas.json`` in the data
    directory, or a ZooKeeper ``/config/users`` / ``/config/clients`` node."""


class SslAuthenticationError(EngineError):
    """A client's TLS handshake with a broker failed: the broker's certificate does not chain
    to the trust store or does not name the host (``ssl.endpoint.identification.algorithm=https``),
    or the broker refused the client's certificate (Kafka's SslAuthenticationException).  Not
    retried: the configuration must change."""


class SslPrincipalMappingError(EngineError):
    """No rule of ``ssl.principal.mapping.rules`` matched a client certificate's distinguished
    name (Kafka's NoMatchingRule): the TLS client cannot be given a principal, so the
    connection is not authenticated."""


class ZooKeeperAuthError(EngineError):
    """ZooKeeper refused the broker's login (a wrong SASL password, an unknown user), or requires
    SASL and the broker has none: the broker does not start.  The message names ZooKeeper and the
    principal, never the password."""
