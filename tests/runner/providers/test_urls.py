"""The SSRF guard on provider base URLs. No test needs DNS: literals, `localhost` or a fake."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest

from runner.providers import DEFAULT_ALLOWLIST, ProviderConfigError, validate_base_url
from runner.providers.urls import Allowlist, connect_addresses


class TestRefusals:
    @pytest.mark.parametrize(
        ("url", "reason"),
        [
            # schemes and shapes
            ("ftp://8.8.8.8/v1", "scheme must be http or https, not 'ftp'"),
            ("file:///etc/passwd", "scheme must be http or https, not 'file'"),
            ("8.8.8.8/v1", "scheme must be http or https, not 'missing'"),
            ("", "base URL is empty"),
            ("http:///v1", "base URL has no host"),
            ("http://user:secret@8.8.8.8/v1", "must not contain credentials"),
            ("http://8.8.8.8@127.0.0.1/v1", "must not contain credentials"),
            ("http://127.0.0.1:11434@8.8.8.8/v1", "must not contain credentials"),
            ("http://8.8.8.8/v1?key=1", "must not have a query string or fragment"),
            ("http://8.8.8.8/v1#frag", "must not have a query string or fragment"),
            ("http://8.8.8.8:99999/v1", "cannot be parsed"),
            ("http://8.8.8.8:0/v1", "port must be between 1 and 65535"),
            ("http://8.8.8.8\t/v1", "whitespace, control characters or backslashes"),
            ("http://8.8.8.8\\@127.0.0.1/", "whitespace, control characters or backslashes"),
            ("http://[::1/v1", "cannot be parsed"),
            ("http://exa mple.com/", "whitespace"),
            ("http://-bad-.example/", "is not a valid host name"),
            # loopback, in every spelling
            ("http://127.0.0.1:8080/v1", "127.0.0.1, a loopback address"),
            ("http://127.1/v1", "127.1 is 127.0.0.1, a loopback address"),
            ("http://0x7f000001/v1", "0x7f000001 is 127.0.0.1, a loopback address"),
            ("http://2130706433/v1", "2130706433 is 127.0.0.1, a loopback address"),
            ("http://0177.0.0.1/v1", "0177.0.0.1 is 127.0.0.1, a loopback address"),
            ("http://127.0.0.1.:8080/v1", "127.0.0.1, a loopback address"),
            ("http://[::1]/v1", "::1, a loopback address"),
            ("http://[::ffff:127.0.0.1]/v1", "::ffff:127.0.0.1 is 127.0.0.1, a loopback address"),
            ("http://[::ffff:7f00:1]/v1", "::ffff:7f00:1 is 127.0.0.1, a loopback address"),
            ("http://localhost:8080/v1", "localhost resolves to"),
            # private, link-local, metadata
            ("http://10.0.0.5/v1", "10.0.0.5, a private address"),
            ("http://172.16.3.4/v1", "172.16.3.4, a private address"),
            ("http://172.31.255.255/v1", "a private address"),
            ("http://192.168.1.1/v1", "192.168.1.1, a private address"),
            ("http://169.254.169.254/latest/meta-data", "169.254.169.254, a link-local address"),
            ("http://[::ffff:169.254.169.254]/", "a link-local address"),
            ("http://[fe80::1]/v1", "fe80::1, a link-local address"),
            ("http://[fd00::1]/v1", "fd00::1, a private address"),
            ("http://[fc00::1]/v1", "a private address"),
            ("http://100.64.0.1/v1", "100.64.0.1, not a public address"),
            # special ranges
            ("http://0.0.0.0/v1", "0.0.0.0, an unspecified address"),
            ("http://0/v1", "0 is 0.0.0.0, an unspecified address"),
            ("http://[::]/v1", "::, an unspecified address"),
            ("http://224.0.0.1/v1", "224.0.0.1, a multicast address"),
            ("http://[ff02::1]/v1", "a multicast address"),
            ("http://240.0.0.1/v1", "240.0.0.1, a reserved address"),
            ("http://255.255.255.255/v1", "a reserved address"),
            ("http://192.0.2.10/v1", "a private address"),  # documentation range
            ("http://[2001:db8::1]/v1", "a private address"),
            # IPv6 forms that carry a private IPv4 address a gateway may forward to
            ("http://[2002:7f00:1::]/v1", "embedding 127.0.0.1, a loopback address"),
            ("http://[2002:a00:1::]/v1", "embedding 10.0.0.1, a private address"),
            ("http://[64:ff9b::a00:1]/v1", "embedding 10.0.0.1, a private address"),
        ],
    )
    def test_it_refuses_a_url_with_a_reason(self, url: str, reason: str) -> None:
        with pytest.raises(ProviderConfigError) as caught:
            validate_base_url(url, allowlist=DEFAULT_ALLOWLIST)

        assert reason in str(caught.value)
        assert caught.value.retryable is False

    def test_it_never_echoes_credentials(self) -> None:
        with pytest.raises(ProviderConfigError) as caught:
            validate_base_url("https://admin:hunter2@8.8.8.8/v1", allowlist=[])

        assert "hunter2" not in str(caught.value)

    def test_it_suggests_the_allowlist_for_internal_addresses(self) -> None:
        with pytest.raises(ProviderConfigError, match="add it to PROVIDER_URL_ALLOWLIST"):
            validate_base_url("http://10.1.2.3/v1", allowlist=[])


class TestAcceptance:
    @pytest.mark.parametrize(
        ("url", "allowlist", "normalised"),
        [
            ("http://8.8.8.8/v1", [], "http://8.8.8.8/v1"),
            ("https://8.8.8.8:8443/v1/", [], "https://8.8.8.8:8443/v1"),
            ("HTTP://8.8.8.8:80/v1", [], "http://8.8.8.8/v1"),
            ("https://[2001:4860:4860::8888]/v1", [], "https://[2001:4860:4860::8888]/v1"),
            (
                "https://[2001:4860:4860:0:0:0:0:8888]:443/v1",
                [],
                "https://[2001:4860:4860::8888]/v1",
            ),
            ("  http://8.8.4.4/openai/v1  ", [], "http://8.8.4.4/openai/v1"),
            ("http://[::ffff:8.8.8.8]/v1", [], "http://8.8.8.8/v1"),
            ("http://[2002:808:808::]/v1", [], "http://[2002:808:808::]/v1"),
            # the default allowlist: the local Ollama, by address and by name
            ("http://127.0.0.1:11434/v1", DEFAULT_ALLOWLIST, "http://127.0.0.1:11434/v1"),
            ("http://localhost:11434", DEFAULT_ALLOWLIST, "http://localhost:11434"),
            ("http://LOCALHOST.:11434/v1", DEFAULT_ALLOWLIST, "http://localhost:11434/v1"),
            ("http://127.1:11434/v1", DEFAULT_ALLOWLIST, "http://127.0.0.1:11434/v1"),
            # operator entries: host, host:port, IPv6, CIDR
            ("http://10.1.2.3:8000/v1", ["10.0.0.0/8"], "http://10.1.2.3:8000/v1"),
            ("http://192.168.0.9/v1", ["192.168.0.9"], "http://192.168.0.9/v1"),
            ("http://[fd00::5]:8000/v1", ["[fd00::5]:8000"], "http://[fd00::5]:8000/v1"),
            ("http://[fd00::5]/v1", ["fd00::/8"], "http://[fd00::5]/v1"),
            ("http://[::1]:9000/v1", ["::1"], "http://[::1]:9000/v1"),
            ("http://localhost:9000/v1", ["localhost"], "http://localhost:9000/v1"),
            ("http://[::ffff:7f00:1]:8000/v1", ["127.0.0.0/8"], "http://127.0.0.1:8000/v1"),
        ],
    )
    def test_it_accepts_and_normalises(
        self, url: str, allowlist: list[str], normalised: str
    ) -> None:
        assert validate_base_url(url, allowlist=allowlist) == normalised

    def test_a_host_port_entry_allows_only_that_port(self) -> None:
        validate_base_url("http://127.0.0.1:11434/v1", allowlist=["127.0.0.1:11434"])
        with pytest.raises(ProviderConfigError, match="loopback"):
            validate_base_url("http://127.0.0.1:11435/v1", allowlist=["127.0.0.1:11434"])

    def test_it_trusts_an_allowlisted_name_without_resolving_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def no_dns(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("resolved an allowlisted name")

        monkeypatch.setattr(socket, "getaddrinfo", no_dns)

        assert validate_base_url("http://ollama:11434/v1", allowlist=["ollama:11434"])


class TestResolution:
    @staticmethod
    def resolve_to(monkeypatch: pytest.MonkeyPatch, addresses: list[str]) -> None:
        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            return [
                (
                    socket.AF_INET6 if ":" in a else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (a, port),
                )
                for a in addresses
            ]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    def test_it_accepts_a_name_whose_every_address_is_public(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.resolve_to(monkeypatch, ["8.8.8.8", "2001:4860:4860::8888"])

        assert (
            validate_base_url("https://api.example.com/v1", allowlist=[])
            == "https://api.example.com/v1"
        )

    def test_it_refuses_a_name_with_one_private_address_among_public_ones(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.resolve_to(monkeypatch, ["8.8.8.8", "10.0.0.7"])

        with pytest.raises(
            ProviderConfigError,
            match=re.escape("api.example.com resolves to 10.0.0.7, a private address"),
        ):
            validate_base_url("https://api.example.com/v1", allowlist=[])

    def test_it_refuses_a_name_resolving_to_a_mapped_loopback(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.resolve_to(monkeypatch, ["::ffff:127.0.0.1"])

        with pytest.raises(
            ProviderConfigError, match=re.escape("resolves to 127.0.0.1, a loopback address")
        ):
            validate_base_url("https://api.example.com/v1", allowlist=[])

    def test_it_accepts_a_name_resolving_inside_an_allowlisted_network(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.resolve_to(monkeypatch, ["10.20.0.4"])

        assert validate_base_url("http://vllm.internal:8000/v1", allowlist=["10.20.0.0/16"])

    def test_it_refuses_a_name_that_does_not_resolve(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

        with pytest.raises(
            ProviderConfigError, match=re.escape("host 'nowhere.example' does not resolve")
        ):
            validate_base_url("https://nowhere.example/v1", allowlist=[])

    def test_localhost_resolves_to_loopback_and_is_refused(self) -> None:
        with pytest.raises(
            ProviderConfigError, match=r"localhost resolves to .*, a loopback address"
        ):
            validate_base_url("http://localhost:8080/v1", allowlist=[])

    def test_connect_time_check_refuses_what_validation_would(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.resolve_to(monkeypatch, ["169.254.169.254"])

        with pytest.raises(
            ProviderConfigError, match=re.escape("now resolves to 169.254.169.254, a link-local")
        ):
            connect_addresses("api.example.com", 443, Allowlist.parse([]))

    def test_connect_time_check_returns_the_addresses_to_pin(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.resolve_to(monkeypatch, ["8.8.8.8", "8.8.4.4"])

        assert connect_addresses("api.example.com", 443, Allowlist.parse([])) == [
            "8.8.8.8",
            "8.8.4.4",
        ]
        assert connect_addresses("localhost", 11434, Allowlist.parse(DEFAULT_ALLOWLIST)) is None


class TestAllowlistEntries:
    @pytest.mark.parametrize(
        ("entry", "reason"),
        [
            ("", "is not a host, host:port or CIDR"),
            ("   ", "is not a host, host:port or CIDR"),
            ("localhost:http", "has an invalid port"),
            ("localhost:70000", "has an invalid port"),
            ("[::1]:x", "is not a valid host name"),
            ("10.0.0.0/33", "allowlist entry '10.0.0.0/33'"),
            ("http://ollama:11434", "allowlist entry 'http://ollama:11434'"),
            ("bad host", "is not a valid host name"),
        ],
    )
    def test_it_refuses_a_bad_entry(self, entry: str, reason: str) -> None:
        with pytest.raises(ProviderConfigError, match=reason.replace("[", r"\[")):
            validate_base_url("http://8.8.8.8/v1", allowlist=[entry])

    def test_it_refuses_a_string_instead_of_a_list(self) -> None:
        with pytest.raises(ProviderConfigError, match="must be a list of entries, not a string"):
            validate_base_url("http://8.8.8.8/v1", allowlist="127.0.0.1:11434")  # type: ignore[arg-type]

    def test_the_default_allowlist_holds_only_the_local_ollama(self) -> None:
        assert DEFAULT_ALLOWLIST == ("127.0.0.1:11434", "localhost:11434")
