"""Contestant manifests (`contestants/<name>/contestant.toml`): discovery and validation.

The format is described in contestants/README.md. A bad manifest is reported, never fatal
for the others: `discover` returns it as a `BrokenManifest` beside the good ones.
"""

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.base import tomltext
from serverlab.base.paths import contestants_root
from serverlab.contestant.placeholders import (
    BUILTIN_PLACEHOLDERS,
    GRPC_OWN_PORTS,
    PART_PLACEHOLDERS,
    PlaceholderError,
    check_placeholders,
)
from serverlab.contestant.tunables import SIZE_WRITES, TYPES, Tunable, TunableValueError, size_bytes

MANIFEST_FILE = "contestant.toml"
SPEC_PARTS = (
    "http",
    "perf",
    "files",
    "upload",
    "control",
    "push",
    "sse",
    "websocket",
    "syslog",
    "syslog-parse",
    "tls",
    "h2",
    "h2c",
    "syslog-tls",
    "grpc",
)
SYSLOG_PARTS = frozenset({"syslog", "syslog-parse", "syslog-tls"})
HTTP_PARTS = frozenset(SPEC_PARTS) - SYSLOG_PARTS
# Server push over SSE and WebSocket uses the emitters and counters of `push` and `control`;
# HTTP/2 over TLS is chosen by TLS's ALPN. The transports carry the parts a server serves
# in cleartext, so they need at least one of them.
PART_NEEDS = {
    "push": ("control",),
    "sse": ("control", "push"),
    "websocket": ("control", "push"),
    "syslog-parse": ("syslog", "control"),
    "h2": ("tls",),
    # Spec §15: RFC 5425 messages are counted as §7's TCP ones, by the same counters.
    "syslog-tls": ("syslog",),
    # Spec §16: Subscribe carries §6's emit cycles. gRPC rides HTTP/2: on the server's h2c
    # port unless its gRPC server listens on its own (checked in _check_grpc_listener).
    "grpc": ("control", "push"),
}
TRANSPORT_PARTS = frozenset({"tls", "h2", "h2c"})
# The parts spoken over TLS or HTTP/2, and gRPC: a run's verify leaves their cases to
# `serverlab verify`, though its tests may speak them (the TLS and h2 cases alone take 37 s
# of go-nethttp's verify here, against 27 s for all its other parts).
UNSPOKEN_BY_RUNS = TRANSPORT_PARTS | {"syslog-tls", "grpc"}
# Spec §7.1: a syslog-parse server is started counting or parsing by this tunable.
SYSLOG_MODE = "syslog_mode"
SYSLOG_MODES = ("count", "parse")
# Spec §16: where a `grpc` server serves its calls. `shared`: on the HTTP/2 listeners
# ({h2c_port}, and {tls_port} by ALPN h2), its gRPC server mounted in its HTTP/2 stack.
# `own`: its gRPC server owns whole connections, on {grpc_port} (and {grpc_tls_port}).
GRPC_LISTENERS = ("shared", "own")
TUNABLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
CASE_ID = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9_]+$")  # part (syslog-tls has a hyphen), then case

_REQUIRED = {
    "name": str,
    "language": str,
    "architecture": str,
    "version": str,
    "start": str,
    "implements": list,
}
_OPTIONAL = {
    "seed": str,
    "debian_packages": list,
    "build": str,
    "artifacts": list,
    "ready": str,
    "ready_timeout_s": (int, float),
    "syslog_count": str,
    "test": str,
    "tunables": dict,
    "framing_limits": dict,
    "protocol_limits": dict,
    "grpc_listener": str,
    "not_claimed": dict,
}
_LIST_OF_STRINGS = ("implements", "debian_packages", "artifacts")
_TUNABLE_KEYS = {"default", "help", "type", "words", "min", "max", "write"}
# Commands run by /bin/sh -c, and the placeholders each may use beyond the built-ins.
COMMAND_KEYS = ("start", "version", "syslog_count", "build", "test")
BUILD_PLACEHOLDERS = {"name"}


class ManifestError(Exception):
    """A manifest that cannot be used; the message names the file and the key."""


class UnknownContestantError(LookupError):
    pass


@dataclass(frozen=True)
class Manifest:
    path: Path
    name: str
    language: str
    architecture: str
    version: str
    start: str
    seed: str = ""
    implements: tuple[str, ...] = ()
    debian_packages: tuple[str, ...] = ()
    build: str = ""
    artifacts: tuple[str, ...] = ()
    ready: str = "tcp"
    ready_timeout_s: float = 30.0
    syslog_count: str = ""
    test: str = ""
    tunables: dict[str, Tunable] = field(default_factory=dict)
    # Framing cases this server's own code cannot pass, each with the reason (spec §1.1).
    framing_limits: dict[str, str] = field(default_factory=dict)
    protocol_limits: dict[str, str] = field(default_factory=dict)
    grpc_listener: str = "shared"
    # Parts it does not claim, each with why: what its stack lacks (issue 36: a contestant
    # without gRPC says why). verify prints the reason beside the parts it does not check.
    not_claimed: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def speaks_http(self) -> bool:
        return bool(HTTP_PARTS & set(self.implements))

    @property
    def uses_syslog_port(self) -> bool:
        return "{syslog_port}" in self.start

    def parts(self) -> list[str]:
        """The spec parts verify checks: the declared ones plus `http` for an HTTP server."""
        declared = set(self.implements)
        if self.speaks_http:
            declared.add("http")
        return [part for part in SPEC_PARTS if part in declared]

    def placeholder_names(self) -> set[str]:
        """Built-ins, tunables, and the placeholders of the parts it claims: a server
        without `tls` is given no {tls_port}, {tls_cert} or {tls_key}."""
        names = set(BUILTIN_PLACEHOLDERS) | set(self.tunables)
        for part in self.implements:
            names |= set(PART_PLACEHOLDERS.get(part, ()))
        return names | set(self.grpc_own_ports())

    def grpc_own_ports(self) -> tuple[str, ...]:
        """The port placeholders of a gRPC server listening on its own (spec §16)."""
        if "grpc" not in self.implements or self.grpc_listener != "own":
            return ()
        return GRPC_OWN_PORTS if "tls" in self.implements else GRPC_OWN_PORTS[:1]

    def is_built(self) -> bool:
        return all((self.folder / artifact).exists() for artifact in self.artifacts)


@dataclass(frozen=True)
class BrokenManifest:
    path: Path
    name: str
    error: str


def load_manifest(path: Path) -> Manifest:
    """Reads and validates one manifest; ManifestError says what is wrong and where."""
    try:
        raw = tomltext.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ManifestError(f"{path}: cannot read: {error}") from None
    return _validate(path, raw)


def _validate(path: Path, raw: dict) -> Manifest:
    def fail(key: str, message: str) -> ManifestError:
        return ManifestError(f"{path}: key '{key}': {message}")

    for key in raw:
        if key not in _REQUIRED and key not in _OPTIONAL:
            raise fail(key, "unknown key")
    for key in _REQUIRED:
        if key not in raw:
            raise fail(key, "missing required key")
    for key, expected in {**_REQUIRED, **_OPTIONAL}.items():
        if key in raw and not isinstance(raw[key], expected):
            raise fail(key, f"expected {_type_name(expected)}, got {type(raw[key]).__name__}")
    for key in _LIST_OF_STRINGS:
        if not all(isinstance(item, str) for item in raw.get(key, [])):
            raise fail(key, "expected a list of strings")
    if raw["name"] != path.parent.name:
        raise fail("name", f"'{raw['name']}' differs from its folder '{path.parent.name}'")
    tunables = _tunables(raw.get("tunables", {}), fail)
    for table in ("framing_limits", "protocol_limits"):
        _check_limits(table, raw.get(table, {}), fail)
    _check_not_claimed(raw.get("not_claimed", {}), raw.get("implements", []), fail)
    plain = {key: value for key, value in raw.items() if key != "tunables"}
    for key in _LIST_OF_STRINGS:
        if key in plain:
            plain[key] = tuple(plain[key])
    if "ready_timeout_s" in plain:
        plain["ready_timeout_s"] = float(plain["ready_timeout_s"])
    manifest = Manifest(path=path, tunables=tunables, **plain)
    _check_parts(manifest, fail)
    _check_commands(manifest, fail)
    return manifest


def _check_limits(name: str, table: dict, fail) -> None:
    for case_id, reason in table.items():
        key = f"{name}.{case_id}"
        if not CASE_ID.match(case_id):
            raise fail(key, "expected a case id such as http.framing_chunk_ext_ctl")
        if not isinstance(reason, str) or not reason.strip():
            raise fail(key, "expected the reason, a non-empty string")


def _check_not_claimed(table: dict, implements: list, fail) -> None:
    for part, reason in table.items():
        key = f"not_claimed.{part}"
        if part not in SPEC_PARTS:
            raise fail(key, f"unknown spec part (known: {', '.join(SPEC_PARTS)})")
        if part in implements:
            raise fail(key, "the part is in implements: it cannot be both claimed and not")
        if not isinstance(reason, str) or not reason.strip():
            raise fail(key, "expected the reason, a non-empty string")


def _type_name(expected) -> str:
    names = {str: "a string", list: "a list", dict: "a table", int: "a number", float: "a number"}
    kinds = expected if isinstance(expected, tuple) else (expected,)
    return names[kinds[0]]


def _tunables(table: dict, fail) -> dict[str, Tunable]:
    tunables = {}
    for name, spec in table.items():
        key = f"tunables.{name}"
        reserved = set(BUILTIN_PLACEHOLDERS).union(*PART_PLACEHOLDERS.values(), GRPC_OWN_PORTS)
        if not TUNABLE_NAME.match(name) or name in reserved:
            raise fail(key, "a tunable name is lower-case [a-z0-9_] and not a built-in placeholder")
        if not isinstance(spec, dict):
            raise fail(key, "expected a table with 'default' and 'type' (and optionally 'help')")
        unknown = set(spec) - _TUNABLE_KEYS
        if unknown:
            raise fail(f"{key}.{sorted(unknown)[0]}", "unknown key")
        for required in ("default", "type"):
            if required not in spec:
                raise fail(f"{key}.{required}", "missing required key")
        default = spec["default"]
        if isinstance(default, bool) or not isinstance(default, str | int | float):
            raise fail(f"{key}.default", "expected a string or a number")
        if not isinstance(spec.get("help", ""), str):
            raise fail(f"{key}.help", "expected a string")
        tunable = Tunable(name, str(default), help=spec.get("help", ""), **_typing(spec, key, fail))
        try:
            tunable.render(tunable.default)
        except TunableValueError as error:
            raise fail(f"{key}.default", str(error)) from None
        tunables[name] = tunable
    return tunables


def _typing(spec: dict, key: str, fail) -> dict:
    """The type keys of one tunable, checked against each other."""
    kind = spec["type"]
    if kind not in TYPES:
        raise fail(f"{key}.type", f"expected one of {', '.join(TYPES)}")
    words = spec.get("words", [])
    if not isinstance(words, list) or not all(isinstance(w, str) and w for w in words):
        raise fail(f"{key}.words", "expected a list of non-empty strings")
    if kind == "word" and not words:
        raise fail(f"{key}.words", "a word tunable lists its words")
    if kind == "path" and words:
        raise fail(f"{key}.words", "a path tunable takes no words")
    typing = {"type": kind, "words": tuple(words)}
    for bound in ("min", "max"):
        if bound in spec:
            typing[bound] = _bound(spec[bound], kind, f"{key}.{bound}", fail)
    if "write" in spec:
        if kind != "size" or spec["write"] not in SIZE_WRITES:
            raise fail(f"{key}.write", f"a size tunable's write is one of {', '.join(SIZE_WRITES)}")
        typing["write"] = spec["write"]
    return typing


def _bound(value, kind: str, key: str, fail) -> float:
    if kind not in ("int", "number", "size"):
        raise fail(key, f"a {kind} tunable has no bounds")
    if kind == "size" and isinstance(value, str) and size_bytes(value) is not None:
        return float(size_bytes(value))
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(key, "expected a number" + (" or a size like 1K" if kind == "size" else ""))
    return float(value)


def _check_parts(manifest: Manifest, fail) -> None:
    if not manifest.implements:
        raise fail("implements", "names no spec part")
    for part in manifest.implements:
        if part not in SPEC_PARTS:
            raise fail("implements", f"unknown spec part '{part}' (known: {', '.join(SPEC_PARTS)})")
    parts = set(manifest.implements)
    for part, needs in PART_NEEDS.items():
        missing = [need for need in needs if part in parts and need not in parts]
        if missing:
            raise fail("implements", f"part '{part}' requires '{missing[0]}'")
    if "syslog" in parts and not manifest.uses_syslog_port:
        raise fail("start", "implements 'syslog' but does not use {syslog_port}")
    if "syslog" in parts and "control" not in parts and not manifest.syslog_count:
        raise fail("syslog_count", "a syslog server without 'control' needs a syslog_count")
    if "syslog-parse" in parts:
        _check_syslog_mode(manifest, fail)
    if manifest.speaks_http and "{port}" not in manifest.start:
        raise fail("start", "an HTTP server's start command must use {port}")
    if parts and parts <= TRANSPORT_PARTS:
        raise fail("implements", "names only transports (tls, h2, h2c): name what they carry")
    for part in sorted(parts):
        for name in PART_PLACEHOLDERS.get(part, ()):
            if f"{{{name}}}" not in manifest.start:
                raise fail("start", f"implements '{part}' but does not use {{{name}}}")
    _check_grpc_listener(manifest, parts, fail)


def _check_grpc_listener(manifest: Manifest, parts: set[str], fail) -> None:
    """Spec §16: gRPC on the h2c port, or on the gRPC server's own ports, all of them used."""
    listener = manifest.grpc_listener
    if listener not in GRPC_LISTENERS:
        known = ", ".join(GRPC_LISTENERS)
        raise fail("grpc_listener", f"expected one of {known}, got '{listener}'")
    if listener == "own" and "grpc" not in parts:
        raise fail("grpc_listener", "names where gRPC is served, but 'grpc' is not implemented")
    if "grpc" in parts and listener == "shared" and "h2c" not in parts:
        own = 'grpc_listener = "own" for a gRPC server on its own port'
        raise fail("implements", f"part 'grpc' requires 'h2c', or {own}")
    for name in manifest.grpc_own_ports():
        if f"{{{name}}}" not in manifest.start:
            raise fail("start", f"serves gRPC on its own listener but does not use {{{name}}}")
    for name in set(GRPC_OWN_PORTS) - set(manifest.grpc_own_ports()):
        if f"{{{name}}}" in manifest.start:
            own = 'grpc_listener = "own"'
            raise fail("start", f"uses {{{name}}}, which only a {own} server gets")


def _check_syslog_mode(manifest: Manifest, fail) -> None:
    """Spec §7.1: the mode is a start argument, the tunable `syslog_mode`."""
    tunable = manifest.tunables.get(SYSLOG_MODE)
    if tunable is None or f"{{{SYSLOG_MODE}}}" not in manifest.start:
        raise fail("start", "implements 'syslog-parse' but does not pass {syslog_mode}")
    if tunable.type != "word" or set(tunable.words) != set(SYSLOG_MODES):
        raise fail(f"tunables.{SYSLOG_MODE}", 'expected type "word", words ["count", "parse"]')
    if tunable.default != "count":
        raise fail(f"tunables.{SYSLOG_MODE}", 'expected default "count" (spec §7.1)')


def _check_commands(manifest: Manifest, fail) -> None:
    for key in COMMAND_KEYS:
        allowed = BUILD_PLACEHOLDERS if key in ("build", "test") else manifest.placeholder_names()
        try:
            check_placeholders(getattr(manifest, key), allowed)
        except PlaceholderError as error:
            raise fail(key, str(error)) from None
    if "{host}" not in manifest.start:
        # SPEC §1: a manifest says how its server is asked to listen on another address.
        raise fail("start", "does not use {host} (the address to listen on besides loopback)")
    if manifest.ready != "tcp" and not manifest.ready.startswith("/"):
        raise fail("ready", "expected a path starting with '/' or \"tcp\"")
    if manifest.ready_timeout_s <= 0:
        raise fail("ready_timeout_s", "expected a positive number of seconds")


def discover(root: Path | None = None) -> list[Manifest | BrokenManifest]:
    """Every `<root>/*/contestant.toml`, sorted by folder name; broken ones included."""
    found: list[Manifest | BrokenManifest] = []
    for path in sorted(contestants_root(root).glob(f"*/{MANIFEST_FILE}")):
        try:
            found.append(load_manifest(path))
        except ManifestError as error:
            found.append(BrokenManifest(path, path.parent.name, str(error)))
    return found


def find(name: str, root: Path | None = None) -> Manifest:
    """The valid manifest called `name`; ManifestError if it is broken, else a lookup error."""
    entries = discover(root)
    for entry in entries:
        if entry.name == name:
            if isinstance(entry, BrokenManifest):
                raise ManifestError(entry.error)
            return entry
    known = ", ".join(entry.name for entry in entries) or "none"
    raise UnknownContestantError(f"unknown contestant '{name}' (known: {known})")
