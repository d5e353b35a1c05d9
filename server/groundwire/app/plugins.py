"""Plug-ins: loaders, embedders, rerankers, chat models and stores from other Python
packages, found through entry points and named by `kind` in the configuration like
the built-in ones.

A package registers an object under one of the groups below, the entry point's name
being the `kind` that configuration uses (pyproject.toml):

    [project.entry-points."groundwire.embedders"]
    my-embedder = "my_package.embedding:build"

Every configuration key of such a section other than `kind` is handed to the
plug-in as its `options` (a read-only mapping of TOML values); the plug-in validates
them and raises ValueError (or TypeError/KeyError) with a message naming the option
when they are wrong. The object an entry point names, per group:

- groundwire.embedders:   build(options) -> EmbeddingProvider
                          (groundwire.providers.embeddings.base)
- groundwire.rerankers:   build(options) -> Reranker (groundwire.providers.rerankers.base)
- groundwire.chat_models: build(model, options) -> ChatModel
                          (groundwire.providers.chat.base), once per model name an
                          agent uses ("<models key>/<model name>")
- groundwire.stores:      build(options) -> Store, or an awaitable of one
                          (groundwire.stores.base; `kind` reports memory or postgres,
                          whichever describes where it keeps data)
- groundwire.loaders:     build(options) -> Loader (groundwire.ingestion.loaders),
                          used for the file extensions an index maps to it in
                          `ingestion.loaders`

Plug-ins are trusted code, installed by the operator, like `tools` import paths.
Unknown kinds are rejected when the configuration is validated (only entry point
metadata is read then); a plug-in is imported and built when the server is built,
and any failure there is a ConfigError naming the key, never a crash.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Any, Literal, TypeVar, get_args

from pydantic import BeforeValidator, Field

from groundwire.app.config_base import ConfigError, StrictModel

__all__ = [
    "CHAT_MODELS",
    "EMBEDDERS",
    "LOADERS",
    "RERANKERS",
    "STORES",
    "PluginConfig",
    "accept_plugins",
    "build_plugin",
    "build_plugin_async",
    "has_members",
    "plugin_kind",
    "registered_kinds",
]

EMBEDDERS = "groundwire.embedders"
RERANKERS = "groundwire.rerankers"
CHAT_MODELS = "groundwire.chat_models"
STORES = "groundwire.stores"
LOADERS = "groundwire.loaders"

# The tag of PluginConfig in a section's discriminated union: the configuration
# writes the plug-in's own kind, `accept_plugins` moves it to `plugin`.
PLUGIN_TAG = "plugin"
KIND_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"

T = TypeVar("T")


class PluginConfig(StrictModel):
    """A section whose kind a plug-in provides; `options` are its other keys."""

    kind: Literal["plugin"]
    plugin: str = Field(pattern=KIND_PATTERN)
    options: dict[str, Any] = Field(default_factory=dict)


def _entry_points(group: str, name: str | None = None) -> list[EntryPoint]:
    found = entry_points(group=group)
    return [ep for ep in found if name is None or ep.name == name]


def registered_kinds(group: str) -> list[str]:
    """Kinds that installed plug-ins register in `group`, sorted."""
    return sorted({ep.name for ep in _entry_points(group)})


def _unknown_kind(kind: str, group: str, builtins: frozenset[str]) -> str:
    plugins = registered_kinds(group)
    installed = f": {', '.join(plugins)})" if plugins else ": none installed)"
    if not builtins:
        return (
            f"kind {kind!r} is not registered by an installed plug-in"
            f" (entry point group {group}{installed}"
        )
    return (
        f"kind {kind!r} is neither built in ({', '.join(sorted(builtins))}) nor registered"
        f" by an installed plug-in (entry point group {group}{installed}"
    )


def _literal_kinds(union: object) -> frozenset[str]:
    kinds: set[str] = set()
    for member in get_args(union) or (union,):
        field = getattr(member, "model_fields", {}).get("kind")
        if field is not None:
            kinds.update(str(k) for k in get_args(field.annotation))
    return frozenset(kinds)


def accept_plugins(group: str, builtin: object) -> BeforeValidator:
    """The validator that lets a section's union take plug-in kinds: a mapping whose
    `kind` is none of `builtin`'s (a union of models with Literal kinds) becomes a
    PluginConfig when a plug-in registers that kind in `group`; otherwise the
    error names the kind, the built-in ones and the installed plug-ins."""
    builtins = _literal_kinds(builtin)

    def rewrite(value: object) -> object:
        if not isinstance(value, Mapping):
            return value
        kind = value.get("kind")
        if not isinstance(kind, str) or kind in builtins or kind == PLUGIN_TAG:
            return value
        if not _entry_points(group, kind):
            raise ValueError(_unknown_kind(kind, group, builtins))
        options = {k: v for k, v in value.items() if k != "kind"}
        return {"kind": PLUGIN_TAG, "plugin": kind, "options": options}

    return BeforeValidator(rewrite)


def plugin_kind(group: str, builtins: frozenset[str]) -> Callable[[str], str]:
    """A validator for a plain `kind` string (the store's): built in, or registered."""

    def check(kind: str) -> str:
        if kind not in builtins and not _entry_points(group, kind):
            raise ValueError(_unknown_kind(kind, group, builtins))
        return kind

    return check


def _load(key: str, group: str, kind: str) -> Callable[..., Any]:
    found = _entry_points(group, kind)
    if not found:
        raise ConfigError(f"{key}: {_unknown_kind(kind, group, frozenset())}")
    if len({(ep.value, ep.group) for ep in found}) > 1:
        raise ConfigError(
            f"{key}: kind {kind!r} is registered by more than one installed plug-in"
            f" (entry point group {group})"
        )
    try:
        obj = found[0].load()
    except Exception as exc:  # an import error, or anything the plug-in's import raises
        raise ConfigError(
            f"{key}: plug-in {kind!r} (entry point group {group}) failed to load:"
            f" {type(exc).__name__}"
        ) from None
    if not callable(obj):
        raise ConfigError(f"{key}: plug-in {kind!r} (entry point group {group}) is not callable")
    return obj  # type: ignore[no-any-return]


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] if text else type(exc).__name__


@contextlib.contextmanager
def _building(key: str, kind: str) -> Iterator[None]:
    """A plug-in factory's failure as a ConfigError naming `key`: its message for
    rejected options (ValueError, TypeError, KeyError), its type for anything else."""
    try:
        yield
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"{key}: plug-in {kind!r} rejected its options: {_short(exc)}") from None
    except Exception as exc:
        raise ConfigError(
            f"{key}: plug-in {kind!r} failed to start: {type(exc).__name__}"
        ) from None


def build_plugin(
    key: str,
    group: str,
    kind: str,
    options: Mapping[str, Any],
    expected: Callable[[object], bool],
    what: str,
    *args: object,
) -> Any:
    """Load the plug-in `kind` of `group` and build it with `(*args, options)`;
    every failure is a ConfigError naming `key`. `expected` checks the protocol
    (`what` names it in the error)."""
    factory = _load(key, group, kind)
    with _building(key, kind):
        built = factory(*args, MappingProxyType(dict(options)))
    return _checked(key, kind, built, expected, what)


async def build_plugin_async(
    key: str,
    group: str,
    kind: str,
    options: Mapping[str, Any],
    expected: Callable[[object], bool],
    what: str,
) -> Any:
    """`build_plugin` for factories that may return an awaitable (stores)."""
    factory = _load(key, group, kind)
    with _building(key, kind):
        built = factory(MappingProxyType(dict(options)))
        if inspect.isawaitable(built):
            built = await built
    return _checked(key, kind, built, expected, what)


def _checked(
    key: str, kind: str, built: object, expected: Callable[[object], bool], what: str
) -> object:
    if not expected(built):
        raise ConfigError(
            f"{key}: plug-in {kind!r} built a {type(built).__name__}, which is not a {what}"
        )
    return built


def has_members(*names: str) -> Callable[[object], bool]:
    """A structural check for protocols that are not runtime-checkable."""

    def check(obj: object) -> bool:
        return all(hasattr(obj, n) for n in names)

    return check
