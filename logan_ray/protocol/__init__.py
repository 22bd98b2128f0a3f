"""Sans-IO codec of the Kafka wire protocol: pure functions over bytes."""
