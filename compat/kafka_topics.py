"""The few ``kafka-topics.sh`` commands librdkafka's tests run, over the Kafka protocol.

librdkafka's tests 0045, 0052 and 0077 create, grow and delete topics by running
``$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS ...`` from a Kafka
distribution. compat/librdkafka.sh points KAFKA_PATH at compat/kafka, whose
script runs this module: the same admin requests (CreateTopics, CreatePartitions,
DeleteTopics) sent with confluent-kafka's AdminClient, so the broker under test
answers them exactly as it would answer Kafka's tool.
"""
from __future__ import annotations

import argparse
import sys


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="kafka-topics.sh")
    p.add_argument("--bootstrap-server", required=True)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true")
    action.add_argument("--alter", action="store_true")
    action.add_argument("--delete", action="store_true")
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument("--config", action="append", default=[], help="key=value (repeatable)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    args = parse(sys.argv[1:] if argv is None else argv)
    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    if args.create:
        config = dict(c.split("=", 1) for c in args.config)
        futures = admin.create_topics([NewTopic(args.topic, args.partitions or -1, args.replication_factor,
                                                config=config)], operation_timeout=30)
    elif args.alter:
        if args.partitions is None:
            print("kafka-topics.sh: --alter supports only --partitions here", file=sys.stderr)
            return 2
        futures = admin.create_partitions([NewPartitions(args.topic, args.partitions)], operation_timeout=30)
    else:
        futures = admin.delete_topics([args.topic], operation_timeout=30)
    try:
        for future in futures.values():
            future.result(timeout=60)
    except Exception as e:  # one line, non-zero exit: the test reports the failed command
        print(f"kafka-topics.sh: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
