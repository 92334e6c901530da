"""Refuse provider base URLs that would let a recipe author reach internal services (SSRF).

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

from .base import ProviderConfigError, ProviderError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The local Ollama an install talks to out of the box; anything else is opt-in.
DEFAULT_ALLOWLIST: tuple[str, ...] = ("127.0.0.1:11434", "localhost:11434")

_DEFAULT_PORTS = {"http": 80, "https": 443}
_ALLOWLIST_HINT = "add it to PROVIDER_URL_ALLOWLIST to allow it"
_HOSTNAME = re.compile(
    r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*"
)
# Characters of the legacy IPv4 spellings inet_aton accepts (127.1, 0x7f000001, 0177.0.0.1).
_NUMERIC_HOST = re.compile(r"[0-9a-fx.]+")
# IPv6 ranges that carry an IPv4 address a gateway may forward to: NAT64 (RFC 6052, 8215).
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


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
            raise ProviderConfigError("the URL allowlist must be a list of entries, not a string")
        names: set[tuple[str, int | None]] = set()
        networks: list[IPNetwork] = []
        for entry in entries:
            if not isinstance(entry, str) or not entry.strip():
                raise ProviderConfigError(
                    f"allowlist entry {entry!r} is not a host, host:port or CIDR"
                )
            text = entry.strip().lower()
            if "/" in text:
                try:
                    networks.append(ipaddress.ip_network(text, strict=False))
                except ValueError as exc:
                    raise ProviderConfigError(f"allowlist entry {entry!r}: {exc}") from None
                continue
            host, port = _split_entry(entry, text)
            names.add((_canonical_host(host, for_what=f"allowlist entry {entry!r}")[0], port))
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
    """Return ``url`` normalised, or raise ProviderConfigError saying why it is refused.

    The scheme must be http or https, there must be no credentials, and every address the
    host resolves to must be public, unless the host (or host:port, or a network holding
    the address) is on ``allowlist``.
    """
    return check_base_url(url, allowlist=allowlist).url


def check_base_url(url: str, *, allowlist: Sequence[str] | Allowlist) -> BaseURL:
    """Check ``url`` like ``validate_base_url`` and return its parts."""
    allowed = Allowlist.parse(allowlist)
    if not isinstance(url, str) or not url.strip():
        raise ProviderConfigError("base URL is empty")
    url = url.strip()
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url) or "\\" in url:
        # urlsplit silently drops tabs and newlines, and clients read backslashes differently.
        raise ProviderConfigError("base URL contains whitespace, control characters or backslashes")
    try:
        parts = urlsplit(url)
        explicit_port = parts.port
    except ValueError as exc:
        raise ProviderConfigError(f"base URL cannot be parsed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ProviderConfigError(
            f"base URL scheme must be http or https, not {parts.scheme or 'missing'!r}"
        )
    if "@" in parts.netloc:
        raise ProviderConfigError("base URL must not contain credentials (user:password@)")
    if not parts.hostname:
        raise ProviderConfigError("base URL has no host")
    if parts.query or parts.fragment:
        raise ProviderConfigError("base URL must not have a query string or fragment")
    if explicit_port == 0:
        raise ProviderConfigError("base URL port must be between 1 and 65535")

    host, literal = _canonical_host(parts.hostname, for_what="base URL host")
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
            raise ProviderConfigError(f"base URL refused: {shown}, {problem}; {_ALLOWLIST_HINT}")
    else:
        for address in _resolve(host, port, error=ProviderConfigError):
            problem = _refusal(address, allowed)
            if problem:
                raise ProviderConfigError(
                    f"base URL refused: {host} resolves to {address}, {problem}; {_ALLOWLIST_HINT}"
                )
    return BaseURL(normalised, scheme, host, port, trusted=False)


def connect_addresses(host: str, port: int, allowlist: Allowlist) -> list[str] | None:
    """Return the checked addresses to connect to for ``host``, or None to connect by name.

    Called for every request, right before connecting, so the addresses used are the ones
    checked (see the module docstring). A name that no longer resolves is a retryable
    failure here: at this point the URL was valid a moment ago.
    """
    if allowlist.allows_name(host, port):
        return None
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    addresses = [literal] if literal is not None else _resolve(host, port, error=None)
    for address in addresses:
        problem = _refusal(address, allowlist)
        if problem:
            raise ProviderConfigError(
                f"refused to connect: {host} now resolves to {address}, {problem}"
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


def _canonical_host(host: str, *, for_what: str) -> tuple[str, IPAddress | None]:
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
                raise ProviderConfigError(f"{for_what} must not carry an IPv6 zone ({host})")
            if address.ipv4_mapped is not None:
                address = address.ipv4_mapped
        return str(address), address
    try:
        name = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise ProviderConfigError(f"{for_what} {host!r} is not a valid host name") from None
    if len(name) > 253 or not _HOSTNAME.fullmatch(name):
        raise ProviderConfigError(f"{for_what} {host!r} is not a valid host name")
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
        raise ProviderConfigError(f"allowlist entry {entry!r} has an invalid port")
    return int(port)


def _resolve(host: str, port: int, *, error: type[ProviderConfigError] | None) -> list[IPAddress]:
    """Resolve ``host`` to every address it has.

    ``error`` is the class to raise when it does not resolve; None raises a retryable
    ProviderError, for connect time, where a resolver hiccup may pass.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        message = f"host {host!r} does not resolve ({reason})"
        if error is None:
            raise ProviderError(message, retryable=True) from None
        raise error(message) from None
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        message = f"host {host!r} resolves to no address"
        if error is None:
            raise ProviderError(message, retryable=True)
        raise error(message)
    return addresses
