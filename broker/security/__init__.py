"""Security: who a connection is (principals) and what it may do (ACLs, the authorizer)."""
