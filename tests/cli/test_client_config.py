"""The CLI's Kafka connection settings: a Kafka tool's --command-config file and the SASL flags."""
from __future__ import annotations

import pytest

from logan_ray.client_config import ClientConfigError, client_conf, from_java_properties


def test_a_kafka_tools_properties_file_becomes_librdkafka_settings(tmp_path):
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                     '    username="admin" password="p\\\\"w";\n'
                     "ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\nssl.truststore.password=x\n"
                     "ssl.endpoint.identification.algorithm=\n")
    assert client_conf(str(props)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
        "sasl.password": 'p"w', "ssl.ca.location": "/etc/ca.pem", "ssl.endpoint.identification.algorithm": "none"}


def test_flags_win_and_the_password_comes_from_the_environment_only():
    conf = client_conf(None, None, None, "ops", {"LOGAN_RAY_SASL_PASSWORD": "s3"})
    assert conf == {"sasl.username": "ops", "sasl.password": "s3", "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-512"}
    with pytest.raises(ClientConfigError, match="LOGAN_RAY_SASL_PASSWORD"):
        client_conf(None, None, None, "ops", {})


def test_stores_the_cli_cannot_read_are_named():
    with pytest.raises(ClientConfigError, match="ssl.truststore.type=JKS"):
        from_java_properties({"ssl.truststore.type": "JKS"})
    with pytest.raises(ClientConfigError, match="sasl.jaas.config"):
        from_java_properties({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"})


def test_connection_options_without_bootstrap_server_are_refused_in_one_line(capsys):
    from logan_ray.cli import main

    assert main(["users", "list", "--sasl-username", "x"]) == 1
    assert capsys.readouterr().err.strip() == ("logan-ray: error: --sasl-username is for the Kafka connection: "
                                               "give --bootstrap-server too")
