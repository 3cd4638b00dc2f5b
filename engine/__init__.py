"""kafka-engine: a Kafka-compatible commit log for Python."""
