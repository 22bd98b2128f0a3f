"""Which Kafka listener settings turn on what for the HTTP API (no Ray: settings only)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "security"))
from certs import make_pki  # noqa: E402

from logan_ray.broker_config import resolve  # noqa: E402
from logan_ray.http.security import http_security  # noqa: E402
from logan_ray.security.config import gateway_security  # noqa: E402


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("http-settings-pki")))


def derive(pki, **settings):
    base = {"ssl.keystore.location": pki.server, "ssl.truststore.location": pki.ca}
    return http_security(gateway_security(resolve({**base, **settings})))


def test_no_listener_security_leaves_the_api_open():
    assert http_security(None) is None
    sec = http_security(gateway_security(resolve({"listeners": "PLAINTEXT://127.0.0.1:0"})))
    assert not sec.active and not sec.tls


def test_a_sasl_listener_turns_on_basic_authentication_and_a_tls_one_https(pki):
    sec = derive(pki, listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0")
    assert sec.authenticate and not sec.tls and not sec.authorizer
    sec = derive(pki, listeners="SASL_SSL://127.0.0.1:0")
    assert sec.authenticate and sec.tls_keystore == pki.server


def test_tls_without_client_certificates_is_https_without_authentication(pki):
    sec = derive(pki, listeners="SSL://127.0.0.1:0")
    assert sec.tls and not sec.authenticate
    sec = derive(pki, listeners="SSL://127.0.0.1:0", **{"ssl.client.auth": "required"})
    assert sec.tls and sec.authenticate  # the Kafka side refuses strangers: so does HTTP


def test_the_authorizer_settings_are_the_gateways(pki):
    sec = derive(pki, listeners="PLAINTEXT://127.0.0.1:0",
                 **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                    "super.users": "User:admin;User:ops", "allow.everyone.if.no.acl.found": "true"})
    assert sec.active and sec.authorizer and not sec.authenticate  # anonymous, under the ACLs
    assert sec.super_users == ("User:admin", "User:ops") and sec.allow_if_no_acl
