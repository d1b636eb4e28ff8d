"""The SASL exchange on the wire, as Kafka answers it: error codes and messages, what is served
before authentication, the legacy v0 handshake with bare tokens, re-authentication (KIP-368),
TLS handshakes that fail or stall, and a fuzzed exchange the broker survives."""

from __future__ import annotations

import random
import socket
import ssl
import struct
import time

import pytest

import protocol
from protocol import ErrorCode, messages

from broker.security.sasl.oauthbearer import client_initial_response
from broker.security.sasl.scram import ScramClient
from tests.security.conftest import SCRAM_USERS
from tokens import unsecured_token

HANDSHAKE, AUTHENTICATE, API_VERSIONS, METADATA = 17, 36, 18, 3


class Wire:
    """A blocking connection speaking raw frames (optionally over TLS)."""

    def __init__(self, address: str, context: ssl.SSLContext | None = None, timeout=10.0):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        if context is not None:
            self.sock = context.wrap_socket(self.sock, server_hostname="localhost")
        self.correlation = 0

    def close(self):
        self.sock.close()

    def send(self, api_key, version, body):
        self.correlation += 1
        frame = protocol.encode_request(api_key, version, self.correlation, "wire", body)
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)

    def frame(self) -> bytes:
        size = struct.unpack(">i", self.exactly(4))[0]
        return self.exactly(size)

    def exactly(self, n) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return out

    def request(self, api_key, version, body):
        self.send(api_key, version, body)
        _, response = protocol.decode_response(api_key, version, self.frame())
        return response

    def closed_by_broker(self, within=10.0) -> bool:
        self.sock.settimeout(within)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionError, ssl.SSLError):
            return True
        except socket.timeout:
            return False

    def handshake(self, mechanism, version=1):
        return self.request(HANDSHAKE, version, messages.SaslHandshakeRequest(mechanism=mechanism))

    def authenticate(self, token: bytes, version=2):
        return self.request(AUTHENTICATE, version,
                            messages.SaslAuthenticateRequest(auth_bytes=token))

    def metadata(self):
        return self.request(METADATA, 12, messages.MetadataRequest(
            topics=None, allow_auto_topic_creation=False))


@pytest.fixture
def sasl(secure_broker):
    connections = []

    def connect(listener="SASL_PLAINTEXT", **kw):
        wire = Wire(secure_broker.address(listener), **kw)
        connections.append(wire)
        return wire
    yield connect
    for wire in connections:
        wire.close()


def test_plain_success_then_requests_are_served(sasl):
    wire = sasl()
    assert wire.request(API_VERSIONS, 3, messages.ApiVersionsRequest(
        client_software_name="wire", client_software_version="1")).error_code == 0
    shake = wire.handshake("PLAIN")
    assert shake.error_code == 0
    assert set(shake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
    answer = wire.authenticate(b"\0alice\0alice-secret")
    assert answer.error_code == 0 and answer.session_lifetime_ms == 0
    assert wire.metadata().brokers


@pytest.mark.parametrize("token,message", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0nobody\0x", "Authentication failed: Invalid username or password"),
    (b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0\0x", "Authentication failed: username not specified"),
    (b"bob\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
])
def test_plain_failures_answer_kafkas_message_and_close(sasl, token, message):
    wire = sasl()
    assert wire.handshake("PLAIN").error_code == 0
    answer = wire.authenticate(token)
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == message
    assert wire.closed_by_broker()


def test_scram_wrong_password(sasl):
    wire = sasl()
    wire.handshake("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "alice", "not-it")
    first = wire.authenticate(client.first_message())
    assert first.error_code == 0
    final = wire.authenticate(client.final_message(bytes(first.auth_bytes)))
    assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert final.error_message == ("Authentication failed during authentication due to invalid "
                                   "credentials with SASL mechanism SCRAM-SHA-256")
    assert wire.closed_by_broker()


def test_scram_unknown_user(sasl):
    wire = sasl()
    wire.handshake("SCRAM-SHA-512")
    answer = wire.authenticate(ScramClient("SCRAM-SHA-512", "nobody", "x").first_message())
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == ("Authentication failed during authentication due to invalid "
                                    "credentials with SASL mechanism SCRAM-SHA-512")
    assert wire.closed_by_broker()


def test_unsupported_mechanism_lists_the_enabled_ones_and_closes(sasl):
    wire = sasl()
    shake = wire.handshake("GSSAPI")
    assert shake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert "PLAIN" in shake.mechanisms
    assert wire.closed_by_broker()


@pytest.mark.parametrize("first", ["metadata", "authenticate"])
def test_nothing_else_is_served_before_authentication(sasl, first):
    wire = sasl()
    if first == "metadata":
        wire.send(METADATA, 12, messages.MetadataRequest(topics=None,
                                                         allow_auto_topic_creation=False))
    else:
        wire.send(AUTHENTICATE, 2, messages.SaslAuthenticateRequest(auth_bytes=b"\0a\0b"))
    assert wire.closed_by_broker()


def test_request_between_handshake_and_authenticate_closes(sasl):
    wire = sasl()
    wire.handshake("PLAIN")
    wire.send(METADATA, 12, messages.MetadataRequest(topics=None, allow_auto_topic_creation=False))
    assert wire.closed_by_broker()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_legacy_v0_handshake_then_bare_tokens(sasl, mechanism):
    wire = sasl()
    assert wire.handshake(mechanism, version=0).error_code == 0
    if mechanism == "PLAIN":
        token = b"\0alice\0alice-secret"
        wire.sock.sendall(struct.pack(">i", len(token)) + token)
        assert wire.frame() == b""
    else:
        client = ScramClient(mechanism, "alice", SCRAM_USERS["alice"])
        first = client.first_message()
        wire.sock.sendall(struct.pack(">i", len(first)) + first)
        final = client.final_message(wire.frame())
        wire.sock.sendall(struct.pack(">i", len(final)) + final)
        client.verify_server_final(wire.frame())
    assert wire.metadata().brokers


def test_legacy_bare_token_with_wrong_password_closes(sasl):
    wire = sasl()
    wire.handshake("PLAIN", version=0)
    token = b"\0alice\0bad"
    wire.sock.sendall(struct.pack(">i", len(token)) + token)
    assert wire.closed_by_broker()


def test_oauthbearer_invalid_token_gets_the_rfc7628_error_then_fails(sasl):
    wire = sasl()
    wire.handshake("OAUTHBEARER")
    expired = unsecured_token("carol", lifetime=-600)
    challenge = wire.authenticate(client_initial_response(expired))
    assert challenge.error_code == 0
    assert bytes(challenge.auth_bytes) == b'{"status":"invalid_token"}'
    answer = wire.authenticate(b"\x01")
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == '{"status":"invalid_token"}'
    assert wire.closed_by_broker()


def test_sasl_on_a_plaintext_listener_is_an_illegal_state(sasl):
    wire = sasl("PLAINTEXT")
    assert wire.handshake("PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert wire.metadata().brokers


def test_authenticated_connection_refuses_a_second_authenticate(sasl):
    wire = sasl()
    wire.handshake("PLAIN")
    assert wire.authenticate(b"\0alice\0alice-secret").error_code == 0
    assert wire.handshake("PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert wire.authenticate(b"\0alice\0alice-secret").error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert wire.metadata().brokers


def test_oversized_frame_before_authentication_closes(sasl):
    wire = sasl()
    wire.sock.sendall(struct.pack(">i", 600_000) + b"x" * 1000)
    assert wire.closed_by_broker()


def test_fuzzed_sasl_exchanges_never_hurt_the_broker(sasl, secure_broker):
    """Truncated, oversized, garbage and out-of-order tokens on a live listener: each connection
    is answered or closed, and a well-behaved client still authenticates afterwards."""
    rng = random.Random(15)
    broker = secure_broker.broker
    before = len(broker._connections)
    valid = [b"\0alice\0alice-secret", ScramClient("SCRAM-SHA-256", "alice", "x").first_message(),
             client_initial_response(unsecured_token("carol"))]
    for round_ in range(60):
        wire = sasl()
        wire.sock.settimeout(10)
        mechanism = rng.choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "X"])
        action = rng.randrange(6)
        try:
            if action == 0:     # handshake cut short
                frame = protocol.encode_request(HANDSHAKE, 1, 1, "f",
                                                messages.SaslHandshakeRequest(mechanism=mechanism))
                wire.sock.sendall(struct.pack(">i", len(frame)) + frame[:rng.randrange(len(frame))])
                wire.sock.shutdown(socket.SHUT_WR)
            elif action == 1:   # garbage token after a handshake
                wire.handshake(mechanism)
                token = rng.randbytes(rng.randrange(0, 300))
                wire.authenticate(token)
            elif action == 2:   # mutated valid token
                wire.handshake(mechanism)
                token = bytearray(rng.choice(valid))
                for _ in range(rng.randrange(1, 5)):
                    token[rng.randrange(len(token))] = rng.randrange(256)
                wire.authenticate(bytes(token))
            elif action == 3:   # bare tokens with random sizes (legacy mode)
                wire.handshake(mechanism, version=0)
                size = rng.choice([0, 5, 70000, 2**31 - 1, -1])
                wire.sock.sendall(struct.pack(">i", size) + rng.randbytes(min(max(size, 0), 200)))
            elif action == 4:   # out of order: the final SCRAM message first
                wire.handshake("SCRAM-SHA-256")
                wire.authenticate(b"c=biws,r=abc,p=" + rng.randbytes(8).hex().encode())
            else:               # garbage instead of a request header
                wire.sock.sendall(struct.pack(">i", 40) + rng.randbytes(40))
        except (ConnectionError, OSError, protocol.DecodeError):
            pass
        wire.close()
    deadline = time.monotonic() + 20   # every fuzzed connection is closed on the broker too
    while len(broker._connections) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(broker._connections) <= before
    wire = sasl()
    wire.handshake("SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "bob", SCRAM_USERS["bob"])
    first = wire.authenticate(client.first_message())
    final = wire.authenticate(client.final_message(bytes(first.auth_bytes)))
    assert final.error_code == 0
    client.verify_server_final(bytes(final.auth_bytes))
    assert wire.metadata().brokers


# --------------------------------------------------------------------------------------- TLS
def _client_context(pki, cert=False):
    context = ssl.create_default_context(cafile=pki.path("ca.pem"))
    if cert:
        context.load_cert_chain(pki.path("client-cert.pem"), pki.path("client-key.pem"))
    return context


def test_plaintext_client_on_a_tls_port_is_closed_at_once(secure_broker):
    wire = Wire(secure_broker.address("SSL"))
    started = time.monotonic()
    wire.send(API_VERSIONS, 0, messages.ApiVersionsRequest())
    assert wire.closed_by_broker(within=5)
    assert time.monotonic() - started < 5
    wire.close()


def test_stalled_tls_handshake_is_bounded(tmp_path, pki):
    from broker.testing import running_broker
    config = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
              "ssl.keystore.location": pki.path("server.pem"), "ssl.handshake.timeout.ms": "500"}
    with running_broker(tmp_path, config) as running:
        stalled = socket.create_connection(("127.0.0.1", running.port), timeout=10)
        started = time.monotonic()
        assert stalled.recv(10) == b""     # closed without a word
        assert time.monotonic() - started < 5
        stalled.close()
        failed = running.broker.auth_audit._counts["SSL"][1]
        assert failed >= 1


def test_tls_verification_failures_close_and_are_counted(secure_broker):
    before = secure_broker.broker.auth_audit._counts.get("MTLS", [0, 0])[1]
    wire = None
    with pytest.raises((ssl.SSLError, ConnectionError)):
        wire = Wire(secure_broker.address("MTLS"), context=_client_context(secure_broker.pki))
        wire.metadata()   # TLS 1.3: the refusal of a missing certificate arrives after connect
    if wire:
        wire.close()
    deadline = time.monotonic() + 5
    while secure_broker.broker.auth_audit._counts.get("MTLS", [0, 0])[1] == before \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert secure_broker.broker.auth_audit._counts["MTLS"][1] > before


def test_tls_client_certificate_principal_over_raw_wire(secure_broker):
    wire = Wire(secure_broker.address("SSL"), context=_client_context(secure_broker.pki, True))
    assert wire.metadata().brokers
    assert "User:alice" in secure_broker.principals()
    wire.close()


def test_failed_authentications_are_in_the_metrics(secure_broker):
    text = secure_broker.broker.metrics.render().decode()
    failed = [line for line in text.splitlines()
              if line.startswith("kafka_server_socket_server_metrics_failed_authentication_total")]
    assert failed and any(float(line.split()[-1]) > 0 for line in failed)
    assert "alice-secret" not in text and "admin-secret" not in text


def test_audit_records_the_failure_but_never_the_secret(sasl, secure_broker, monkeypatch):
    audit = secure_broker.broker.auth_audit
    seen = []
    original = audit.failed
    monkeypatch.setattr(audit, "failed", lambda *args, **kw: (seen.append(args),
                                                               original(*args, **kw)))
    for mechanism, token in (("PLAIN", b"\0alice\0Sup3r-s3cret-guess"),
                             ("OAUTHBEARER", client_initial_response(
                                 unsecured_token("Sup3r-s3cret-guess", lifetime=-600)))):
        wire = sasl()
        wire.handshake(mechanism)
        if wire.authenticate(token).error_code == 0:
            wire.authenticate(b"\x01")
        assert wire.closed_by_broker()
    assert len(seen) == 2
    assert all("Sup3r" not in " ".join(map(str, args)) for args in seen)
    assert seen[0][2] == "PLAIN" and "Invalid username or password" in seen[0][3]


def test_audit_log_is_rate_limited_per_address(caplog):
    from broker.security.audit import AuthenticationAudit
    caplog.set_level("WARNING", logger="odradek.security.audit")
    audit = AuthenticationAudit()
    for port in range(5):
        audit.failed("SASL_SSL", f"10.0.0.1:{port}", "PLAIN", "bad password")
    audit.failed("SASL_SSL", "10.0.0.2:1", "PLAIN", "bad password")
    lines = [r.getMessage() for r in caplog.records if r.name == "odradek.security.audit"]
    assert len(lines) == 2 and "peer=10.0.0.2:1" in lines[1]
    assert audit._counts["SASL_SSL"][1] == 6


def test_nothing_pipelined_behind_a_failed_authentication_is_served(sasl, secure_broker):
    counts = secure_broker.broker.auth_audit._counts
    wire = sasl()
    wire.handshake("PLAIN")
    successes = counts.get("SASL_PLAINTEXT", [0])[0]
    frames = [protocol.encode_request(AUTHENTICATE, 2, 10 + i, "wire",
                                      messages.SaslAuthenticateRequest(auth_bytes=token))
              for i, token in enumerate((b"\0alice\0wrong", b"\0alice\0alice-secret"))]
    frames.append(protocol.encode_request(METADATA, 12, 20, "wire", messages.MetadataRequest(
        topics=None, allow_auto_topic_creation=False)))
    wire.sock.sendall(b"".join(struct.pack(">i", len(f)) + f for f in frames))   # one burst
    _, first = protocol.decode_response(AUTHENTICATE, 2, wire.frame())
    assert first.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert wire.closed_by_broker()   # no answer to the second login nor to Metadata
    assert counts["SASL_PLAINTEXT"][0] == successes   # the second login was not even tried
