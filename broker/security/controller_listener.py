"""Authentication and authorization on the controller listener (the quorum's own server).

The controller listener is served by the quorum transport, not by the broker's connection loop, so
it gets its own gatekeeper. ``ControllerListenerGuard.for_config(config)`` is None when the
listener is PLAINTEXT and no authorizer is configured (nothing to check); otherwise
``await guard.accept(stream)`` does the TLS handshake (bounded by ``ssl.handshake.timeout.ms``;
an SSL listener takes the principal from the client certificate) and returns a ``ControllerSession``
or None when the peer failed it. ``session.screen(header, body)`` is called for every request:

- SASL listeners: nothing but ApiVersions, SaslHandshake (v1+) and SaslAuthenticate before the
  exchange succeeds (as on a broker listener; anything else closes the connection);
- with ``authorizer.class.name`` set, what Kafka's controller checks: CLUSTER_ACTION on the cluster
  for the KRaft RPCs and the brokers' lifecycle requests, DESCRIBE for DescribeQuorum /
  DescribeCluster. The admin requests brokers forward here (CreateTopics, CreateAcls, ...) also need
  CLUSTER_ACTION: the broker that took them authorized its client already, and this listener is
  for the cluster's own nodes (Kafka would check the forwarded principal inside an Envelope).

A refused request gets Kafka's CLUSTER_AUTHORIZATION_FAILED answer where the response has a
top-level error code, and the connection is closed otherwise.
"""

from __future__ import annotations

import logging

import trio

import protocol
from protocol import ErrorCode

from .access import error_response
from .acls import CLUSTER_NAME, AclOperation, ResourceType
from .audit import AuthenticationAudit
from .authenticator import RequestRefused, SaslAuthenticator
from .authorizer import StandardAuthorizer
from .delegation_tokens import TokenCredentials, token_secret_key
from .listener import ListenerSecurity
from .principal import ANONYMOUS, KafkaPrincipal
from .principal_mapping import NoMatchingRule
from .tls import subject_name

log = logging.getLogger("odradek.security.controller")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
DESCRIBE_APIS = {55, 60}   # DescribeQuorum, DescribeCluster


class ControllerListenerGuard:
    def __init__(self, security: ListenerSecurity | None, authorizer: StandardAuthorizer | None,
                 token_credentials: TokenCredentials | None = None):
        self.security = security
        self.authorizer = authorizer
        self.auth_audit = AuthenticationAudit()
        self.token_credentials = token_credentials or TokenCredentials(None)   # token logins
        self._controller = None

    @classmethod
    def for_config(cls, config) -> "ControllerListenerGuard | None":
        listener = config.controller_listener
        security = ListenerSecurity.for_listener(config, listener) if listener else None
        authorizer = StandardAuthorizer.from_config(config)
        if security is None and authorizer is None:
            return None
        return cls(security, authorizer, TokenCredentials(token_secret_key(config)))

    def attach(self, controller) -> None:
        """Follow `controller`'s image: its SCRAM credentials and ACLs."""
        self._controller = controller
        if self.authorizer is not None:
            self.authorizer.load(controller.image.acls)
            controller.add_listener(self.authorizer.on_image_change)

    @property
    def image(self):   # what SaslAuthenticator reads SCRAM credentials and tokens from
        return self._controller.image

    async def accept(self, stream: trio.SocketStream) -> "ControllerSession | None":
        session = ControllerSession(self, stream)
        security = self.security
        if security is None or not security.uses_tls:
            return session
        tls = trio.SSLStream(stream, security.ssl_context, server_side=True)
        with trio.move_on_after(security.handshake_timeout_s):
            try:
                await tls.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                reason = getattr(exc.__cause__, "reason", None) or str(exc.__cause__ or exc)
                self.auth_audit.failed(security.listener_name, session.peer, None,
                                       f"TLS handshake failed: {reason}")
                return None
            session.stream = tls
            if session.authenticator is None:   # SSL: the certificate says who this is
                certificate = tls.getpeercert(binary_form=True)
                if certificate:
                    try:
                        session.set_principal(KafkaPrincipal.user(
                            security.principal_mapper.name_for(subject_name(certificate))))
                    except NoMatchingRule as exc:
                        self.auth_audit.failed(security.listener_name, session.peer, None,
                                               str(exc))
                        return None
                self.auth_audit.succeeded(security.listener_name)
            return session
        self.auth_audit.failed(security.listener_name, session.peer, None,
                               "TLS handshake timed out")
        return None


class ControllerSession:
    """One connection on the controller listener: who is on the other end, and what it may do."""

    def __init__(self, guard: ControllerListenerGuard, stream):
        self.guard = guard
        self.stream = stream
        self.principal = ANONYMOUS
        try:
            host, port = stream.socket.getpeername()[:2]
            self.peer, self.client_host = f"{host}:{port}", host
        except OSError:
            self.peer, self.client_host = "?", ""
        security = guard.security
        self.authenticator = (SaslAuthenticator(security, self, guard)
                              if security is not None and security.uses_sasl else None)
        self.close_after_answer = False

    def set_principal(self, principal: KafkaPrincipal) -> None:
        self.principal = principal

    def screen(self, header, body):
        """None: serve the request. Otherwise the answer to send instead (SASL steps, refusals);
        raises RequestRefused when the connection must close without an answer."""
        api_key = header.api_key
        authenticator = self.authenticator
        if authenticator is not None:
            if api_key == SASL_HANDSHAKE and header.api_version == 0:
                raise RequestRefused("SASL with unframed tokens (SaslHandshake v0) is not "
                                     "served on the controller listener")
            authenticator.check_request(api_key)
            if api_key == SASL_HANDSHAKE:
                response, self.close_after_answer = authenticator.handshake(
                    header.api_version, body.mechanism)
                return response
            if api_key == SASL_AUTHENTICATE:
                response, self.close_after_answer = authenticator.authenticate(
                    header.api_version, bytes(body.auth_bytes))
                return response
        if api_key in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return None
        return self._authorize(header, body)

    def _authorize(self, header, body):
        authorizer = self.guard.authorizer
        if authorizer is None:
            return None
        operation = (AclOperation.DESCRIBE if header.api_key in DESCRIBE_APIS
                     else AclOperation.CLUSTER_ACTION)
        spec = protocol.API_SPECS.get(header.api_key)
        if authorizer.authorize(self.principal, self.client_host, operation, ResourceType.CLUSTER,
                                CLUSTER_NAME, api=spec.name if spec else str(header.api_key)):
            return None
        try:
            return error_response(header.api_key, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, body)
        except AttributeError:   # no top-level error code to carry the refusal
            raise RequestRefused(f"{self.principal} may not use api {header.api_key} on the "
                                 "controller listener") from None
