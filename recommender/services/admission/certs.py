"""A CA and a serving certificate for the webhook, for clusters without cert-manager.

``create_certificates`` writes ``ca.crt`` (give it to ``webhook install --ca-bundle``),
``tls.crt`` and ``tls.key`` (give them to ``webhook serve``): an ECDSA P-256 CA valid
for ten years and a serving certificate it signs, valid for one year, whose subject
alternative names are the Service's DNS names (``<svc>.<ns>.svc`` and friends) and any
extra DNS names or IP addresses asked for. With ``client_name``, also a client
certificate for the API server (``client.crt``, ``client.key``, one year, signed by
another CA of its own, ``client-ca.crt``, for ``webhook serve --client-ca``). The CAs'
private keys are not kept unless asked: re-run the command to rotate.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVING_DAYS = 365


@dataclass(frozen=True)
class CertificatePaths:
    """Where the files were written."""

    ca_cert: Path
    cert: Path
    key: Path
    ca_key: Path | None
    client_ca_cert: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None


def service_names(namespace: str, service: str) -> list[str]:
    """The DNS names the API server may use for a Service."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def create_certificates(
    *,
    directory: Path,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = (),
    keep_ca_key: bool = False,
    client_name: str | None = None,
    now: dt.datetime | None = None,
) -> CertificatePaths:
    """Write a new CA and serving certificate into ``directory`` (and a client
    certificate named ``client_name`` with its own CA, when given)."""
    if not dns_names and not ip_addresses:
        raise ValueError("dns_names or ip_addresses: the certificate needs a name")
    now = now or dt.datetime.now(dt.UTC)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _certificate_authority("vpaweb-webhook-ca", now)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    cert = _leaf(
        _name(dns_names[0] if dns_names else ip_addresses[0]),
        key,
        ca_key,
        ca_cert,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        now=now,
    ).add_extension(x509.SubjectAlternativeName(names), critical=False)
    pem = serialization.Encoding.PEM
    paths = CertificatePaths(
        ca_cert=directory / "ca.crt",
        cert=directory / "tls.crt",
        key=directory / "tls.key",
        ca_key=directory / "ca.key" if keep_ca_key else None,
    )
    paths.ca_cert.write_bytes(ca_cert.public_bytes(pem))
    paths.cert.write_bytes(cert.sign(ca_key, hashes.SHA256()).public_bytes(pem))
    _write_private(paths.key, key)
    if paths.ca_key is not None:
        _write_private(paths.ca_key, ca_key)
    if client_name:
        # A CA of its own: the serving CA, which the API server trusts for the
        # webhook's name, never vouches for a client, nor this one for a server.
        client_ca_key, client_ca = _certificate_authority(
            "vpaweb-webhook-client-ca", now
        )
        client_key = ec.generate_private_key(ec.SECP256R1())
        client = _leaf(
            _name(client_name),
            client_key,
            client_ca_key,
            client_ca,
            usage=ExtendedKeyUsageOID.CLIENT_AUTH,
            now=now,
        )
        paths = replace(
            paths,
            client_ca_cert=directory / "client-ca.crt",
            client_cert=directory / "client.crt",
            client_key=directory / "client.key",
        )
        (directory / "client-ca.crt").write_bytes(client_ca.public_bytes(pem))
        (directory / "client.crt").write_bytes(
            client.sign(client_ca_key, hashes.SHA256()).public_bytes(pem)
        )
        _write_private(directory / "client.key", client_key)
    return paths


def _certificate_authority(
    common_name: str, now: dt.datetime
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new self-signed CA (its key, its certificate), valid ``CA_DAYS``."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(common_name)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return ca_key, ca_cert


def _leaf(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    *,
    usage: x509.ObjectIdentifier,
    now: dt.datetime,
) -> x509.CertificateBuilder:
    """A certificate for ``key`` the CA signs, for one ``usage``, valid
    ``SERVING_DAYS`` (the caller adds extensions and signs)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=SERVING_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )


def _write_private(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_bytes(data)
