"""Model sources that name something other than a hub id or a local path.

`artifact:<key>` names a model in the site's artifact store (a trained checkpoint, an
uploaded model): a folder stored with its manifest, or one file (an ARPA model). The
engine knows no store; the process that loads models registers how to turn such a source
into a local path (gym.artifact_cache, registered by the evaluations app), and
`resolve` is what load_model calls first. No torch, no Django."""

from __future__ import annotations

from collections.abc import Callable

ARTIFACT = "artifact:"

_resolvers: dict[str, Callable[[str], str]] = {}


def register(prefix: str, resolver: Callable[[str], str]) -> None:
    """Sources that start with `prefix` are given to `resolver(rest)`, which returns a
    local path."""
    _resolvers[prefix] = resolver


def artifact_source(key: str) -> str:
    return f"{ARTIFACT}{key}"


def artifact_key(source: str) -> str | None:
    """The store key an `artifact:` source names, else None."""
    return source[len(ARTIFACT) :] if source.startswith(ARTIFACT) else None


def resolve(source: str) -> str:
    """The local path of a source with a registered prefix (fetched if it must be), or
    the source itself."""
    for prefix, resolver in _resolvers.items():
        if source.startswith(prefix):
            return resolver(source[len(prefix) :])
    return source
