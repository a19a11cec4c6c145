"""What a connection error says failed, in the words of the libraries agents are built on.

Agents tell a connection that failed (their endpoint refused it, did not
resolve, failed the TLS handshake) from an answer of their provider; the run
stops once a few attempts in a row failed alike before any got through
(:mod:`ksi.runs.stops`). Both read the error text here.
"""

from __future__ import annotations

import re

#: (what failed, pattern): the ways a CLI says it never reached its endpoint, as Node
#: (``ECONNREFUSED``, ``ENOTFOUND``), Rust's reqwest/hyper (Codex: "error sending
#: request", "Connection failed"), Python's httpx/requests/litellm
#: (``APIConnectionError``, "Name or service not known") and OpenSSL word it. Node's
#: bare "fetch failed" is left out: it wraps any failure of a request, and its cause
#: (``ECONNREFUSED``...) says when it was the connection.
CONNECTION_KINDS = (
    (
        "the TLS handshake failed",
        r"certificate verify failed|CERTIFICATE_VERIFY_FAILED|self[- ]signed certificate"
        r"|unable to (?:get|verify) (?:the )?(?:first |local issuer )?certificate"
        r"|UNABLE_TO_VERIFY_LEAF_SIGNATURE|DEPTH_ZERO_SELF_SIGNED_CERT|ERR_TLS_CERT"
        r"|SSL(?:Error|: ?WRONG_VERSION_NUMBER| routines)|wrong version number"
        r"|tls handshake|handshake failure|invalid peer certificate",
    ),
    (
        "the host name did not resolve",
        r"ENOTFOUND|EAI_AGAIN|getaddrinfo|Name or service not known|nodename nor servname"
        r"|Temporary failure in name resolution|failed to lookup address|dns error"
        r"|Could not resolve host|No address associated with hostname",
    ),
    (
        "the connection was refused",
        r"ECONNREFUSED|Connection refused|connect\(\) failed|actively refused",
    ),
    (
        "the endpoint could not be reached",
        r"ENETUNREACH|EHOSTUNREACH|Network is unreachable|No route to host|ETIMEDOUT"
        r"|connect(?:ion)? timed out|error sending request|Connection failed"
        r"|waiting for network|APIConnectionError|Connection error\."
        r"|ConnectError|ConnectionError|Failed to establish a new connection"
        r"|Unable to connect",
    ),
)

#: Any of them (for :func:`ksi.agents.errors.classify_text`, case-insensitive).
CONNECTION_PATTERN = "|".join(p for _, p in CONNECTION_KINDS)


def connection_failure(text: str) -> str:
    """What a connection error text says failed ("the connection was refused"...), or ""."""
    for what, pattern in CONNECTION_KINDS:
        if re.search(pattern, text, re.IGNORECASE):
            return what
    return ""
