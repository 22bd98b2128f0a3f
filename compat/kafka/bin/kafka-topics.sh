#!/usr/bin/env bash
# Stand-in for Kafka's kafka-topics.sh in librdkafka's tests (KAFKA_PATH=compat/kafka); see compat/kafka_topics.py.
exec "${PYTHON:-python3}" "$(dirname "$0")/../../kafka_topics.py" "$@"
