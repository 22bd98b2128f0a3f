"""Real X.509 certificates for the security tests: a CA, a server certificate, client certificates.

Generated with ``cryptography`` per test session; PEM files as Kafka's PEM keystores
expect them (private key and certificate chain in one file).
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Pki:
    folder: str
    ca: str  # CA certificate (truststore for both sides)
    server: str  # server key + certificate chain (ssl.keystore.location)
    server_cert: str
    server_key: str

    def client(self, cn: str, org: str = "logan-ray tests") -> tuple[str, str]:
        """(certificate file, key file) of a client certificate with subject CN=cn,O=org."""
        return _issue(self, cn, org)


def _name(cn: str, org: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


def make_pki(folder: str) -> Pki:
    os.makedirs(folder, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = _key()
    ca_name = _name("logan-ray test CA", "logan-ray tests")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    key = _key()
    cert = (x509.CertificateBuilder().subject_name(_name("localhost", "logan-ray tests")).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    pki = Pki(folder, _write(os.path.join(folder, "ca.pem"), ca_pem),
              _write(os.path.join(folder, "server.keystore.pem"), _pem_key(key) + cert_pem + ca_pem),
              _write(os.path.join(folder, "server.pem"), cert_pem), _write(os.path.join(folder, "server.key"),
                                                                          _pem_key(key)))
    pki._ca_key, pki._ca_name = ca_key, ca_name  # type: ignore[attr-defined]
    return pki


def _issue(pki: Pki, cn: str, org: str) -> tuple[str, str]:
    now = datetime.datetime.now(datetime.timezone.utc)
    key = _key()
    cert = (x509.CertificateBuilder().subject_name(_name(cn, org)).issuer_name(pki._ca_name)  # type: ignore
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(pki._ca_key, hashes.SHA256()))  # type: ignore[attr-defined]
    base = os.path.join(pki.folder, f"client-{cn}")
    return (_write(base + ".pem", cert.public_bytes(serialization.Encoding.PEM)),
            _write(base + ".key", _pem_key(key)))
