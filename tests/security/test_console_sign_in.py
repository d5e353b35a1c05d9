"""The console's sign-in document and its Content-Security-Policy: only origins
(scheme://host[:port]) of http(s) endpoints ever reach the policy header, and
without identity providers the policy is the console's own-origin one."""

from __future__ import annotations

from groundwire.api.http.console import CONTENT_SECURITY_POLICY, content_security_policy
from groundwire.api.http.sign_in import origin


def test_only_origins_reach_the_policy() -> None:
    assert origin("https://sso.example.com/realms/acme/protocol/openid-connect/token") == (
        "https://sso.example.com"
    )
    assert origin("http://127.0.0.1:8080/x") == "http://127.0.0.1:8080"
    assert origin("https://[::1]:8443/t") == "https://[::1]:8443"
    for bad in (
        "javascript:alert(1)",
        "data:text/html,x",
        "https://",
        "https://evil.example.com;script-src *",
        "https://a b.example.com/",
        "ftp://files.example.com/",
        "https://host:notaport/",
    ):
        assert origin(bad) is None, bad


def test_the_policy_widens_connect_src_only() -> None:
    assert content_security_policy(()) == CONTENT_SECURITY_POLICY
    widened = content_security_policy(["https://sso.example.com"])
    assert "connect-src 'self' https://sso.example.com;" in widened
    assert widened.replace(" https://sso.example.com", "") == CONTENT_SECURITY_POLICY
