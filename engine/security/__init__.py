"""Security: the listeners (listeners.py), TLS contexts and the TLS client's principal (tls.py),
authentication (SASL PLAIN, SCRAM) and its credentials, and ACLs, as sans-I/O parts the broker
wires in.  Kafka's configuration keys and semantics throughout."""
