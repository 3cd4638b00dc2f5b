"""Security: authentication (SASL PLAIN, SCRAM) and its credentials, as sans-I/O parts the
broker's connection wires in.  Kafka's configuration keys and semantics throughout."""
