"""Pure pieces of authentication: JAAS parsing, principal mapping rules, SCRAM against RFC 7677's
test vector, JWT validation, key stores, listener settings and their start-up errors."""

from __future__ import annotations

import base64
import json
import time

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.security.jaas import JaasError, parse_jaas_config, parse_single_module
from broker.security.listener import ListenerSecurity
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from broker.security.principal_mapping import NoMatchingRule, PrincipalMapper
from broker.security.sasl import AuthenticationFailed
from broker.security.sasl.jwt import InvalidToken, JwksValidator, UnsecuredValidator
from broker.security.sasl.plain import PlainServer
from broker.security.sasl.scram import (ScramClient, ScramServer, credential_from_salted,
                                        salted_password)
from broker.security.settings import ListenerSettings
from tokens import unsecured_token


def test_principal_shape():
    assert str(KafkaPrincipal("User", "alice")) == "User:alice"
    assert ANONYMOUS == KafkaPrincipal.parse("User:ANONYMOUS")


# ------------------------------------------------------------------------------------ JAAS
def test_jaas_quoting_comments_and_flags():
    module = parse_single_module(
        '/* a comment */ org.apache.kafka.common.security.plain.PlainLoginModule Required\n'
        '  username="ad\\"min" // trailing\n password=secret user_bob="b b";')
    assert module.flag == "required"
    assert module.options == {"username": 'ad"min', "password": "secret", "user_bob": "b b"}


@pytest.mark.parametrize("text", ["", "Module required user=x", "Module maybe;",
                                  'Module required user="x;', "Module required =x;"])
def test_jaas_errors(text):
    with pytest.raises(JaasError):
        parse_jaas_config(text)


def test_jaas_single_module_rule():
    with pytest.raises(JaasError):
        parse_single_module("A required; B required;")


# ----------------------------------------------------------------------- principal mapping
def test_mapping_rules_in_order_with_case():
    mapper = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers,.*$/$1/L,"
                             "RULE:^CN=([a-z]+)\\/x,.*$/svc-$1/U, DEFAULT")
    assert mapper.name_for("CN=Alice,OU=ServiceUsers,O=Odradek,C=US") == "alice"
    assert mapper.name_for("CN=bob/x,O=Odradek") == "SVC-BOB"
    assert mapper.name_for("CN=carol,O=Odradek") == "CN=carol,O=Odradek"


def test_mapping_without_default_refuses_unmatched_names():
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*),O=x$/$1/").name_for("CN=a,O=y")


def test_mapping_rule_syntax_errors():
    with pytest.raises(ConfigError):
        PrincipalMapper("RULE:^CN=(.*$/$1/")
    with pytest.raises(ConfigError):
        PrincipalMapper("NOT_A_RULE")


# ----------------------------------------------------------------------------------- SASL
def test_plain_server():
    server = PlainServer({"alice": "secret"})
    server.evaluate(b"alice\0alice\0secret")
    assert server.complete and server.principal_name == "alice"
    with pytest.raises(AuthenticationFailed, match="authorization id"):
        PlainServer({"alice": "secret"}).evaluate(b"bob\0alice\0secret")


def test_scram_sha256_matches_rfc7677_vector(monkeypatch):
    # RFC 7677 section 3: user "user", password "pencil", fixed nonces and salt
    from broker.security.sasl import scram
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = credential_from_salted(
        "SCRAM-SHA-256", salted_password("SCRAM-SHA-256", "pencil", salt, 4096), salt, 4096)
    server = ScramServer("SCRAM-SHA-256", lambda user, m: credential if user == "user" else None)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.principal_name == "user"
    client = ScramClient("SCRAM-SHA-256", "user", "pencil")   # and our client agrees
    client._nonce = "rOprNGfwEbeRWgbNEkqO"
    client.first_message()
    assert client.final_message(first).endswith(b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify_server_final(final)


def test_scram_rejects_a_replayed_or_foreign_nonce():
    salt = b"salt" * 4
    credential = credential_from_salted(
        "SCRAM-SHA-512", salted_password("SCRAM-SHA-512", "pw", salt, 4096), salt, 4096)
    server = ScramServer("SCRAM-SHA-512", lambda user, m: credential)
    client = ScramClient("SCRAM-SHA-512", "u", "pw")
    server_first = server.evaluate(client.first_message())
    final = client.final_message(server_first).replace(b"r=", b"r=X", 1)
    with pytest.raises(AuthenticationFailed):
        server.evaluate(final)


# ------------------------------------------------------------------------------------ JWT
def test_unsecured_validator_claims_and_scope():
    validator = UnsecuredValidator({"unsecuredValidatorRequiredScope": "kafka"})
    with pytest.raises(InvalidToken) as failure:
        validator.validate(unsecured_token("carol"))
    assert failure.value.status == "insufficient_scope"
    assert UnsecuredValidator({}).validate(unsecured_token("carol")).principal_name == "carol"
    with pytest.raises(InvalidToken, match="expired"):
        UnsecuredValidator({}).validate(unsecured_token("carol", lifetime=-5))
    with pytest.raises(InvalidToken):
        UnsecuredValidator({}).validate("not-a-token")


def _settings(config: dict, name="SASL_SSL", protocol="SASL_SSL"):
    base = {"listeners": f"{name}://127.0.0.1:0", "log.dirs": "/tmp/x",
            "listener.security.protocol.map": f"{name}:{protocol}"}
    return ListenerSettings(BrokerConfig({**base, **config}), name, protocol)


def test_jwks_validator_audience_issuer_skew(token_issuer):
    settings = _settings({
        "sasl.oauthbearer.jwks.endpoint.url": "file://" + token_issuer.jwks_path,
        "sasl.oauthbearer.expected.audience": "odradek,other",
        "sasl.oauthbearer.expected.issuer": token_issuer.issuer,
        "sasl.oauthbearer.clock.skew.seconds": "30"})
    validator = JwksValidator(settings)
    assert validator.validate(token_issuer.token("dave")).principal_name == "dave"
    assert validator.validate(token_issuer.token("erin", algorithm="ES256")).principal_name == "erin"
    # expired 10 s ago: inside the 30 s skew; 60 s ago: outside
    assert validator.validate(token_issuer.token("f", lifetime=90, issued_at=time.time() - 100))
    for bad in (token_issuer.token("f", lifetime=40, issued_at=time.time() - 100),
                token_issuer.token("f", audience="x"),
                token_issuer.token("f", issuer="https://evil"),
                token_issuer.token("f", signer=token_issuer.stranger),
                token_issuer.token("f", kid="unknown"),
                token_issuer.token("f", issued_at=time.time() + 3600)):
        with pytest.raises(InvalidToken):
            validator.validate(bad)
    header, claims, signature = token_issuer.token("dave").split(".")
    forged = json.loads(base64.urlsafe_b64decode(claims + "=="))
    forged["sub"] = "root"
    forged_claims = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    with pytest.raises(InvalidToken, match="signature"):
        validator.validate(f"{header}.{forged_claims}.{signature}")


# ------------------------------------------------------------------------- listener settings
def test_listener_overrides_win_over_plain_keys(pki):
    settings = _settings({"ssl.client.auth": "none",
                          "listener.name.sasl_ssl.ssl.client.auth": "required",
                          "sasl.jaas.config": "A required;",
                          "listener.name.sasl_ssl.plain.sasl.jaas.config": "B required;"})
    assert settings.get("ssl.client.auth") == "required"
    assert settings.for_mechanism("PLAIN", "sasl.jaas.config") == "B required;"
    assert settings.for_mechanism("SCRAM-SHA-256", "sasl.jaas.config") == "A required;"


@pytest.mark.parametrize("config,message", [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI is not supported"),
    ({"sasl.enabled.mechanisms": "PLAIN"},
     "needs listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "ssl.keystore.location": "/nonexistent",
      "ssl.keystore.type": "PEM"}, "cannot read ssl.keystore.location"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256"}, "needs a key store"),
])
def test_start_up_errors(config, message):
    settings = _settings(config, "SASL_PLAINTEXT", "SASL_PLAINTEXT") if "ssl.keystore.location" \
        not in config and "key store" not in message else _settings(config)
    with pytest.raises(ConfigError, match=message.split(" is ")[0]):
        ListenerSecurity(settings)


def test_key_stores_pem_inline_encrypted_and_pkcs12(pki):
    def read(name):
        with open(pki.path(name)) as handle:
            return handle.read()
    for config in (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem")},
            {"ssl.keystore.type": "PEM",
             # inline values lose their line breaks in properties files: still accepted
             "ssl.keystore.certificate.chain": read("server-cert.pem").replace("\n", " "),
             "ssl.keystore.key": read("server-key-encrypted.pem"), "ssl.key.password": "keypass"},
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("server.p12"),
             "ssl.keystore.password": "storepass", "ssl.client.auth": "required",
             "ssl.truststore.type": "PEM",
             "ssl.truststore.certificates": read("ca.pem")}):
        security = ListenerSecurity(_settings(config, "SSL", "SSL"))
        assert security.ssl_context is not None
    with pytest.raises(ConfigError):
        ListenerSecurity(_settings({"ssl.keystore.type": "PKCS12", "ssl.keystore.location":
                                    pki.path("server.p12"), "ssl.keystore.password": "wrong"},
                                   "SSL", "SSL"))


def test_cipher_suites_and_protocols(pki):
    security = ListenerSecurity(_settings({
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, "SSL", "SSL"))
    names = {c["name"] for c in security.ssl_context.get_ciphers()
             if c["protocol"] != "TLSv1.3"}
    assert names == {"ECDHE-ECDSA-AES128-GCM-SHA256"}
    with pytest.raises(ConfigError):
        ListenerSecurity(_settings({"ssl.keystore.type": "PEM",
                                    "ssl.keystore.location": pki.path("server.pem"),
                                    "ssl.cipher.suites": "TLS_NO_SUCH_SUITE_WITH_NOTHING"},
                                   "SSL", "SSL"))


def test_scram_credentials_in_the_metadata_image_and_snapshot():
    from broker.controller import records as r
    from broker.controller.image import MetadataImage
    from broker.controller.scram import ScramDeletion, ScramUpsertion, alteration_records
    image = MetadataImage(cluster_id="c")
    salt = b"s" * 16
    salted = salted_password("SCRAM-SHA-512", "pw", salt, 4096)
    batch, results = alteration_records(image, [], [ScramUpsertion("ann", 2, 4096, salt, salted)])
    assert results == {"ann": (0, None)}
    image = image.apply(batch, 1)
    stored = image.scram_credentials[("ann", "SCRAM-SHA-512")]
    assert stored == credential_from_salted("SCRAM-SHA-512", salted, salt, 4096)
    rebuilt = MetadataImage(cluster_id="c").apply(
        r.decode_records(r.encode_records(image.to_records())), 1)
    assert rebuilt.scram_credentials == image.scram_credentials
    batch, results = alteration_records(image, [ScramDeletion("ann", 2)], [])
    assert not image.apply(batch, 2).scram_credentials


def test_jwks_over_http_with_key_rotation(token_issuer, tmp_path):
    """An http(s) JWKS endpoint: keys fetched at start-up; a token signed by a rotated-in key fails
    once (it starts a refresh off the event loop) and is accepted once the refresh is back."""
    import functools
    import http.server
    import shutil
    import threading
    from tokens import TokenIssuer
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(token_issuer.jwks_path, served / "jwks.json")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
        validator = JwksValidator(_settings({"sasl.oauthbearer.jwks.endpoint.url": url}))
        assert validator.validate(token_issuer.token("hal")).principal_name == "hal"
        (tmp_path / "rotated").mkdir()
        rotated = TokenIssuer(tmp_path / "rotated")
        with open(rotated.jwks_path) as source:
            document = json.load(source)
        for key in document["keys"]:
            key["kid"] = "next-" + key["kid"]
        (served / "jwks.json").write_text(json.dumps(document))
        token = rotated.token("ivy", kid="next-rsa-1")
        with pytest.raises(InvalidToken):
            validator.validate(token)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                assert validator.validate(token).principal_name == "ivy"
                break
            except InvalidToken:
                time.sleep(0.05)
        else:
            pytest.fail("the rotated key was never fetched")
    finally:
        server.shutdown()
        server.server_close()
