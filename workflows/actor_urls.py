"""Refuse provider base URLs that would let a recipe author reach internal services (SSRF).

One guard for both ends: actors are checked with it when they are written (the API, the
admin, the demo seed) and the providers check again when they call (runner/providers/urls.py
raises their errors), against the same allowlist (``settings_allowlist``). Pure Python (no
Django import at module level), so the runner's providers and the recipes app share it.

Actors hold a base URL typed by a user, and the server calls it; without a guard, an actor
pointed at ``http://169.254.169.254/`` or ``http://10.0.0.7:6379/`` turns Branchline into a
proxy into the private network. So a base URL must name a public address, unless an
operator put its host (or a network holding it) on the allowlist.

DNS rebinding: checking a name once and letting the HTTP client resolve it again later
would let a name answer with a public address to the check and a private one to the
connection. ``validate_base_url`` checks every resolved address, and the providers' HTTP
transport resolves again for each request, checks again and connects to the checked
address itself (``connect_addresses``), TLS still verifying the certificate against the
name. What stays out of reach of this module: names on the allowlist are trusted however
they resolve, and HTTP proxies from the environment are not used by the providers, since
a proxy would resolve names on its own.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The local Ollama an install talks to out of the box; anything else is opt-in.
DEFAULT_ALLOWLIST: tuple[str, ...] = ("127.0.0.1:11434", "localhost:11434")

_DEFAULT_PORTS = {"http": 80, "https": 443}
CREDENTIALS_REFUSED = (
    "must not contain credentials; put the key in the env var named by api_key_env"
)
_ALLOWLIST_HINT = "add it to PROVIDER_URL_ALLOWLIST to allow it"
_HOSTNAME = re.compile(
    r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*"
)
# Characters of the legacy IPv4 spellings inet_aton accepts (127.1, 0x7f000001, 0177.0.0.1).
_NUMERIC_HOST = re.compile(r"[0-9a-fx.]+")
# IPv6 ranges that carry an IPv4 address a gateway may forward to: NAT64 (RFC 6052, 8215).
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


class URLRefused(ValueError):
    """Say why a base URL (or an allowlist entry) is refused, never echoing credentials.

    ``reason`` is the message without its subject (``base URL``), for callers that name the
    field themselves (``base_url: must not contain credentials; ...``).
    """

    def __init__(self, reason: str, *, subject: str = "base URL") -> None:
        super().__init__(f"{subject} {reason}" if subject else reason)
        self.reason = reason


class NameUnresolved(URLRefused):
    """Say that a host name does not resolve: at call time, a later attempt may succeed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, subject="")


@dataclass(frozen=True)
class Allowlist:
    """Hold the parsed allowlist: trusted ``(host, port or None)`` names and trusted networks."""

    names: frozenset[tuple[str, int | None]]
    networks: tuple[IPNetwork, ...]

    @classmethod
    def parse(cls, entries: Sequence[str] | Allowlist) -> Allowlist:
        """Parse ``host:port``, ``host``, ``[v6]:port``, bare IPv6 and CIDR entries."""
        if isinstance(entries, Allowlist):
            return entries
        if isinstance(entries, str):
            # A lone string would be read letter by letter; that is always a mistake.
            raise URLRefused(
                "the URL allowlist must be a list of entries, not a string", subject=""
            )
        names: set[tuple[str, int | None]] = set()
        networks: list[IPNetwork] = []
        for entry in entries:
            if not isinstance(entry, str) or not entry.strip():
                raise URLRefused(
                    f"allowlist entry {entry!r} is not a host, host:port or CIDR", subject=""
                )
            text = entry.strip().lower()
            if "/" in text:
                try:
                    networks.append(ipaddress.ip_network(text, strict=False))
                except ValueError as exc:
                    raise URLRefused(f"allowlist entry {entry!r}: {exc}", subject="") from None
                continue
            host, port = _split_entry(entry, text)
            names.add((_canonical_host(host, subject=f"allowlist entry {entry!r}:")[0], port))
        return cls(frozenset(names), tuple(networks))

    def allows_name(self, host: str, port: int) -> bool:
        """Say whether ``host`` (canonical) on ``port`` is trusted by name."""
        return (host, port) in self.names or (host, None) in self.names

    def allows_address(self, address: IPAddress) -> bool:
        """Say whether ``address`` lies in a trusted network."""
        return any(
            address.version == network.version and address in network for network in self.networks
        )


@dataclass(frozen=True)
class BaseURL:
    """Describe a checked base URL; ``trusted`` means its host is allowlisted by name."""

    url: str
    scheme: str
    host: str
    port: int
    trusted: bool


def validate_base_url(url: str, *, allowlist: Sequence[str] | Allowlist) -> str:
    """Return ``url`` normalised, or raise URLRefused saying why it is refused.

    The scheme must be http or https, there must be no credentials, and every address the
    host resolves to must be public, unless the host (or host:port, or a network holding
    the address) is on ``allowlist``. A host name that does not resolve raises NameUnresolved.
    """
    return check_base_url(url, allowlist=allowlist).url


def check_base_url(
    url: str, *, allowlist: Sequence[str] | Allowlist, resolve: bool = True
) -> BaseURL:
    """Check ``url`` like ``validate_base_url`` and return its parts.

    With ``resolve=False`` a host name is not looked up (only its spelling is checked): for
    checks that must not wait on DNS, knowing that the call-time check resolves it anyway.
    """
    allowed = Allowlist.parse(allowlist)
    if not isinstance(url, str) or not url.strip():
        raise URLRefused("is empty")
    url = url.strip()
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url) or "\\" in url:
        # urlsplit silently drops tabs and newlines, and clients read backslashes differently.
        raise URLRefused("contains whitespace, control characters or backslashes")
    try:
        parts = urlsplit(url)
        explicit_port = parts.port
    except ValueError as exc:
        raise URLRefused(f"cannot be parsed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise URLRefused(f"scheme must be http or https, not {parts.scheme or 'missing'!r}")
    if "@" in parts.netloc:
        raise URLRefused(CREDENTIALS_REFUSED)
    if not parts.hostname:
        raise URLRefused("has no host")
    if parts.query or parts.fragment:
        raise URLRefused("must not have a query string or fragment")
    if explicit_port == 0:
        raise URLRefused("port must be between 1 and 65535")

    host, literal = _canonical_host(parts.hostname, subject="base URL")
    port = explicit_port or _DEFAULT_PORTS[scheme]
    netloc = f"[{host}]" if ":" in host else host
    if explicit_port and explicit_port != _DEFAULT_PORTS[scheme]:
        netloc += f":{explicit_port}"
    normalised = f"{scheme}://{netloc}{parts.path.rstrip('/')}"

    if allowed.allows_name(host, port):
        return BaseURL(normalised, scheme, host, port, trusted=True)
    if literal is not None:
        problem = _refusal(literal, allowed)
        if problem:
            spelled = parts.hostname if parts.hostname != host else None
            shown = f"{spelled} is {host}" if spelled else str(host)
            raise URLRefused(f"refused: {shown}, {problem}; {_ALLOWLIST_HINT}")
    elif resolve:
        for address in _resolve(host, port):
            problem = _refusal(address, allowed)
            if problem:
                raise URLRefused(
                    f"refused: {host} resolves to {address}, {problem}; {_ALLOWLIST_HINT}"
                )
    return BaseURL(normalised, scheme, host, port, trusted=False)


def connect_addresses(host: str, port: int, allowlist: Allowlist) -> list[str] | None:
    """Return the checked addresses to connect to for ``host``, or None to connect by name.

    Called for every request, right before connecting, so the addresses used are the ones
    checked (see the module docstring). A name that no longer resolves raises NameUnresolved,
    which the caller may retry: at this point the URL was valid a moment ago.
    """
    if allowlist.allows_name(host, port):
        return None
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    addresses = [literal] if literal is not None else _resolve(host, port)
    for address in addresses:
        problem = _refusal(address, allowlist)
        if problem:
            raise URLRefused(
                f"refused to connect: {host} now resolves to {address}, {problem}", subject=""
            )
    return [str(address) for address in addresses]


def address_problem(address: IPAddress) -> str | None:
    """Say why ``address`` is not a public address, or return None when it is."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address_problem(address.ipv4_mapped)
        for embedded in _embedded_ipv4(address):
            problem = address_problem(embedded)
            if problem:
                return f"embedding {embedded}, {problem}"
    checks = (
        (address.is_unspecified, "an unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address (cloud metadata services live there)"),
        (address.is_multicast, "a multicast address"),
        (address.is_reserved, "a reserved address"),
        (address.is_private, "a private address"),
        (
            isinstance(address, ipaddress.IPv6Address) and address.is_site_local,
            "a site-local address",
        ),
        (not address.is_global, "not a public address"),
    )
    return next((reason for failed, reason in checks if failed), None)


def _refusal(address: IPAddress, allowlist: Allowlist) -> str | None:
    problem = address_problem(address)
    if problem and not allowlist.allows_address(address):
        return problem
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    embedded: list[ipaddress.IPv4Address] = []
    if address.sixtofour is not None:
        embedded.append(address.sixtofour)
    if address.teredo is not None:
        embedded.extend(address.teredo)
    if any(address in network for network in _NAT64):
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return embedded


def _canonical_host(host: str, *, subject: str) -> tuple[str, IPAddress | None]:
    """Return the host's canonical spelling and, for IP literals, the address.

    IPv4 has spellings that ``ipaddress`` refuses but resolvers accept (``127.1``,
    ``0x7f000001``, ``2130706433``, ``0177.0.0.1``); they are read the way the resolver
    reads them, so the address checked is the address connected to.
    """
    # A trailing dot (fully qualified form) changes nothing for the resolver: drop it first.
    host = host.lower().removesuffix(".")
    address: IPAddress | None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
        if _NUMERIC_HOST.fullmatch(host):
            try:
                address = ipaddress.IPv4Address(socket.inet_aton(host))
            except OSError:
                address = None
    if address is not None:
        if isinstance(address, ipaddress.IPv6Address):
            if address.scope_id:
                raise URLRefused(f"host must not carry an IPv6 zone ({host})", subject=subject)
            if address.ipv4_mapped is not None:
                address = address.ipv4_mapped
        return str(address), address
    try:
        name = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise URLRefused(f"host {host!r} is not a valid host name", subject=subject) from None
    if len(name) > 253 or not _HOSTNAME.fullmatch(name):
        raise URLRefused(f"host {host!r} is not a valid host name", subject=subject)
    return name, None


def _split_entry(entry: str, text: str) -> tuple[str, int | None]:
    bracketed = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?", text)
    if bracketed:
        return bracketed[1], _entry_port(entry, bracketed[2])
    if text.count(":") >= 2:
        return text, None
    host, _, port = text.partition(":")
    return host, _entry_port(entry, port or None)


def _entry_port(entry: str, port: str | None) -> int | None:
    if port is None:
        return None
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536):
        raise URLRefused(f"allowlist entry {entry!r} has an invalid port", subject="")
    return int(port)


def _resolve(host: str, port: int) -> list[IPAddress]:
    """Resolve ``host`` to every address it has, or raise NameUnresolved."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise NameUnresolved(f"host {host!r} does not resolve ({reason})") from None
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise NameUnresolved(f"host {host!r} resolves to no address")
    return addresses


def redact_url(url: str) -> str:
    """Return ``url`` with any credentials (``user:password@``) replaced by ``***@``.

    For showing rows written before credentials were refused; any text that is not a URL
    with credentials comes back unchanged.
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    authority_end = len(rest)
    for stop in "/?#":
        found = rest.find(stop)
        if found != -1:
            authority_end = min(authority_end, found)
    authority = rest[:authority_end]
    if "@" not in authority:
        return url
    return f"{scheme}://***@{authority.rpartition('@')[2]}{rest[authority_end:]}"


def settings_allowlist() -> Sequence[str]:
    """Return ``PROVIDER_URL_ALLOWLIST`` when Django settings are configured, else the default.

    Imported here, not at module level: providers must work without Django (CLI tools,
    tests of that package), and settings may be configured after this module loads.
    """
    try:
        from django.conf import settings  # type: ignore[import-untyped]
    except ImportError:
        return DEFAULT_ALLOWLIST
    if not settings.configured:
        return DEFAULT_ALLOWLIST
    allowlist: Sequence[str] = getattr(settings, "PROVIDER_URL_ALLOWLIST", DEFAULT_ALLOWLIST)
    return allowlist
