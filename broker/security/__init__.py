"""Authentication: TLS listeners, SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER), principals.

``listener.ListenerSecurity`` is built per listener at start-up; ``tls_connection`` and
``authenticator`` secure each connection; ``principal.KafkaPrincipal`` is what authorization reads.

Authorization: ``acls`` (Kafka's ACL model and filters), ``authorizer`` (the StandardAuthorizer,
an index of the image's ACLs), ``access`` (the per-API checks handlers call).
"""
