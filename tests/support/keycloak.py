"""A real Keycloak 26 for tests (scripts/keycloak_node.py: from Maven Central, dev
mode on 127.0.0.1, in-memory database), shared by every test and every
pytest-xdist worker of a session, and realms made through its admin REST API.

- `keycloak_session(shared_dir)`: a generator for a session fixture yielding a
  `Keycloak` (base URL + admin credentials): GROUNDWIRE_TEST_KEYCLOAK when set (an
  existing server, `URL` or `URL,admin,password`); else the first worker starts
  one under a file lock in `shared_dir` (the workers' common base temp) and the
  last worker to leave stops it.
- `Keycloak.realm(...)`: a realm with groups, a realm role, users (password
  grant) and a confidential client (client-credentials grant, service account)
  whose access tokens carry `aud` = the audience and a `groups` claim; plus a
  public client for the console (authorization code with PKCE S256).
- `Realm.password_token(user)`, `Realm.client_token()`: real access tokens.
- `Realm.rotate_key()`: a new RSA signing key with a higher priority (new tokens
  carry its `kid`).

Without Java 21+ (or Maven, on first install) the caller is skipped, or failed
under CI=true (tests/support/toolchains.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.support.session_end import at_session_end
from tests.support.toolchains import in_ci, require

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "keycloak_node.py"
EXTERNAL_ENV = "GROUNDWIRE_TEST_KEYCLOAK"
CLIENT_SECRET = "gw-test-client-secret"
PASSWORD = "Pa55-word-for-tests"


def node_module() -> ModuleType:
    """scripts/keycloak_node.py, imported once (scripts/ is not a package)."""
    loaded = sys.modules.get("keycloak_node")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("keycloak_node", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["keycloak_node"] = module
    spec.loader.exec_module(module)
    return module


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"Keycloak: {reason}; CI=true, so this is a failure", pytrace=False)
    pytest.skip(f"Keycloak: {reason}")


def installed_home() -> Path:
    module = node_module()
    try:
        module.java_home()
    except RuntimeError as exc:
        _unavailable(f"needs Java 21+: {exc}")
    if not module.installed():
        require("mvn", purpose="installing Keycloak from Maven Central")
    return Path(module.install())


@dataclass
class User:
    username: str
    groups: Sequence[str] = ()
    roles: Sequence[str] = ()
    id: str = ""


@dataclass
class Realm:
    keycloak: Keycloak
    name: str
    client_id: str
    audience: str
    console_client_id: str
    users: dict[str, User] = field(default_factory=dict)

    @property
    def issuer(self) -> str:
        return f"{self.keycloak.url}/realms/{self.name}"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/protocol/openid-connect/certs"

    @property
    def token_url(self) -> str:
        return f"{self.issuer}/protocol/openid-connect/token"

    def password_token(self, username: str) -> str:
        """A real access token of `username` (resource owner password grant)."""
        return self._token(
            {
                "grant_type": "password",
                "username": username,
                "password": PASSWORD,
                "scope": "openid",
            }
        )

    def client_token(self) -> str:
        """The confidential client's own access token (client credentials grant)."""
        return self._token({"grant_type": "client_credentials"})

    def _token(self, form: Mapping[str, str]) -> str:
        data = {**form, "client_id": self.client_id, "client_secret": CLIENT_SECRET}
        response = httpx.post(self.token_url, data=data, timeout=60)
        response.raise_for_status()
        return str(response.json()["access_token"])

    def service_account_id(self) -> str:
        admin = self.keycloak.admin()
        clients = admin.get(
            f"/admin/realms/{self.name}/clients", params={"clientId": self.client_id}
        )
        client_uuid = clients.json()[0]["id"]
        user = admin.get(f"/admin/realms/{self.name}/clients/{client_uuid}/service-account-user")
        return str(user.json()["id"])

    def allow_console(self, console_url: str) -> None:
        """Register the console at `console_url` (e.g. http://127.0.0.1:PORT/console/)
        as the public client's redirect URI (its origin may then call the token
        endpoint: web origins "+")."""
        admin = self.keycloak.admin()
        clients = admin.get(
            f"/admin/realms/{self.name}/clients", params={"clientId": self.console_client_id}
        ).json()
        client = clients[0]
        client["redirectUris"] = [console_url + "*"]
        client["webOrigins"] = ["+"]
        _ok(admin.put(f"/admin/realms/{self.name}/clients/{client['id']}", json=client))

    def rotate_key(self) -> None:
        """Add an RSA signing key above the realm's current one: tokens issued from
        now on carry its `kid`."""
        admin = self.keycloak.admin()
        realm_id = admin.get(f"/admin/realms/{self.name}").json()["id"]
        response = admin.post(
            f"/admin/realms/{self.name}/components",
            json={
                "name": f"rotated-{uuid.uuid4().hex[:6]}",
                "providerId": "rsa-generated",
                "providerType": "org.keycloak.keys.KeyProvider",
                "parentId": realm_id,
                "config": {
                    "priority": [str(int(time.time()))],
                    "keySize": ["2048"],
                    "active": ["true"],
                    "enabled": ["true"],
                    "algorithm": ["RS256"],
                },
            },
        )
        response.raise_for_status()


@dataclass
class Keycloak:
    url: str
    admin_user: str
    admin_password: str

    def admin(self) -> httpx.Client:
        """An httpx client authenticated as the bootstrap admin (admin-cli)."""
        response = httpx.post(
            f"{self.url}/realms/master/protocol/openid-connect/token",
            data={
                "grant_type": "password",
                "client_id": "admin-cli",
                "username": self.admin_user,
                "password": self.admin_password,
            },
            timeout=60,
        )
        response.raise_for_status()
        token = response.json()["access_token"]
        return httpx.Client(
            base_url=self.url, headers={"authorization": f"Bearer {token}"}, timeout=60
        )

    def realm(
        self,
        name: str,
        users: Sequence[User],
        *,
        audience: str = "groundwire",
        roles: Sequence[str] = (),
        console_redirect: str = "http://127.0.0.1/*",
    ) -> Realm:
        """A fresh realm (a same-named one is replaced) with groups, roles, users,
        a confidential client and a public PKCE client for the console."""
        admin = self.admin()
        admin.delete(f"/admin/realms/{name}")
        _ok(
            admin.post(
                "/admin/realms",
                json={"realm": name, "enabled": True, "accessTokenLifespan": 600},
            )
        )
        groups = sorted({g for u in users for g in u.groups})
        for group in groups:
            _ok(admin.post(f"/admin/realms/{name}/groups", json={"name": group}))
        for role in sorted(set(roles) | {r for u in users for r in u.roles}):
            _ok(admin.post(f"/admin/realms/{name}/roles", json={"name": role}))
        mappers = _mappers(audience)
        client_id = f"{name}-backend"
        _ok(
            admin.post(
                f"/admin/realms/{name}/clients",
                json={
                    "clientId": client_id,
                    "enabled": True,
                    "publicClient": False,
                    "secret": CLIENT_SECRET,
                    "directAccessGrantsEnabled": True,
                    "serviceAccountsEnabled": True,
                    "standardFlowEnabled": False,
                    "protocolMappers": mappers,
                },
            )
        )
        console_id = f"{name}-console"
        _ok(
            admin.post(
                f"/admin/realms/{name}/clients",
                json={
                    "clientId": console_id,
                    "enabled": True,
                    "publicClient": True,
                    "standardFlowEnabled": True,
                    "directAccessGrantsEnabled": False,
                    "redirectUris": [console_redirect],
                    "webOrigins": ["+"],
                    "attributes": {"pkce.code.challenge.method": "S256"},
                    "protocolMappers": mappers,
                },
            )
        )
        realm = Realm(self, name, client_id, audience, console_id)
        for user in users:
            _ok(
                admin.post(
                    f"/admin/realms/{name}/users",
                    json={
                        "username": user.username,
                        "enabled": True,
                        "email": f"{user.username}@{name}.example.test",
                        "emailVerified": True,
                        "firstName": user.username.title(),
                        "lastName": name.title(),
                        "credentials": [
                            {"type": "password", "value": PASSWORD, "temporary": False}
                        ],
                        "groups": [f"/{g}" for g in user.groups],
                    },
                )
            )
            found = admin.get(
                f"/admin/realms/{name}/users", params={"username": user.username, "exact": "true"}
            ).json()
            user.id = found[0]["id"]
            if user.roles:
                all_roles = admin.get(f"/admin/realms/{name}/roles").json()
                wanted = [r for r in all_roles if r["name"] in user.roles]
                _ok(
                    admin.post(
                        f"/admin/realms/{name}/users/{user.id}/role-mappings/realm", json=wanted
                    )
                )
            realm.users[user.username] = user
        return realm


def _mappers(audience: str) -> list[dict[str, Any]]:
    """`aud` = audience and a `groups` claim (group names, full path) in access tokens."""
    return [
        {
            "name": "groundwire-audience",
            "protocol": "openid-connect",
            "protocolMapper": "oidc-audience-mapper",
            "config": {
                "included.custom.audience": audience,
                "access.token.claim": "true",
                "id.token.claim": "false",
            },
        },
        {
            "name": "groups",
            "protocol": "openid-connect",
            "protocolMapper": "oidc-group-membership-mapper",
            "config": {
                "claim.name": "groups",
                "full.path": "true",
                "access.token.claim": "true",
                "id.token.claim": "true",
                "userinfo.token.claim": "true",
            },
        },
    ]


def _ok(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise AssertionError(
            f"keycloak admin API {response.request.method} {response.request.url.path}:"
            f" {response.status_code} {response.text[:500]}"
        )


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def keycloak_session(shared_dir: Path) -> Iterator[Keycloak]:
    """Yield a usable Keycloak for the session (see module docstring)."""
    external = os.environ.get(EXTERNAL_ENV, "").strip()
    module = node_module()
    if external:
        url, _, rest = external.partition(",")
        user, _, password = rest.partition(",")
        yield Keycloak(
            url.rstrip("/"), user or module.ADMIN_USER, password or module.ADMIN_PASSWORD
        )
        return
    shared_dir.mkdir(parents=True, exist_ok=True)
    state = shared_dir / "keycloak.json"
    lock = shared_dir / "keycloak.lock"
    with _flock(lock):
        info = json.loads(state.read_text()) if state.exists() else None
        if info is None or not _alive(info.get("pid", 0)):
            home = installed_home()
            node = module.start(home, shared_dir / "keycloak-logs")
            info = {
                "url": node.url,
                "pid": node.process.pid,
                "owner": os.getpid(),
                "users": 0,
                "startup_seconds": round(node.startup_seconds),
            }
            _owned[str(state)] = node
        info["users"] += 1
        state.write_text(json.dumps(info))
    try:
        yield Keycloak(info["url"], module.ADMIN_USER, module.ADMIN_PASSWORD)
    finally:
        with _flock(lock):
            current = json.loads(state.read_text())
            current["users"] -= 1
            state.write_text(json.dumps(current))
        node = _owned.pop(str(state), None)
        if node is not None:
            # The JVM dies with the process that started it: the owner waits for the
            # other workers to leave, then stops it, at the session's end
            # (tests/support/session_end.py).
            at_session_end(lambda: _stop_when_alone(state, lock, node))


def _stop_when_alone(state: Path, lock: Path, node: Any) -> None:
    deadline = time.monotonic() + 3600
    while _users(state, lock) > 0 and time.monotonic() < deadline:
        time.sleep(0.5)  # polling the other workers' leaving
    with _flock(lock):
        state.unlink(missing_ok=True)
    node.stop()


def _users(state: Path, lock: Path) -> int:
    with _flock(lock):
        return int(json.loads(state.read_text())["users"]) if state.exists() else 0


# The node this process started (stopped once every worker has left).
_owned: dict[str, Any] = {}


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
