"""The principal of a mutual-TLS client: its certificate's distinguished name, mapped by Kafka's rules.

Kafka names an SSL client `User:<name>` where name is the subject DN in RFC 2253 form (most specific
RDN first: `CN=alice,OU=eng,O=Example,C=US`) rewritten by `ssl.principal.mapping.rules`: a comma-separated
list of `RULE:pattern/replacement/[LU]` (the pattern must match the whole DN; `$1`.. refer to its
groups; L or U changes the case) and `DEFAULT` (the DN unchanged). The first rule that matches wins; when
none does the client is refused. Rule splitting and the treatment of back references follow Kafka's
SslPrincipalMapper, so an operator's rules give the same names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybroker.config.types import ConfigError

#: one rule: DEFAULT, or RULE:pattern/replacement/ with optional L or U (escaped slashes allowed)
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")

#: the short names X.500 attributes have in an RFC 2253 DN (Java prints these; others by OID name)
SHORT_NAMES: dict[str, str] = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}


class NoMatchingRule(Exception):
    """No mapping rule applies to a client's DN: the connection is refused, as in Kafka."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        name = self.pattern.sub(_python_replacement(self.replacement, self.pattern.groups), dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def _python_replacement(java: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's replaceAll replacement (`$n`, `\\x` literal) as a function of the match. A reference to a
    group that does not exist loses trailing digits until it does (Kafka's rule), else stays literal."""
    def expand(match: re.Match[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(java):
            char = java[i]
            if char == "\\" and i + 1 < len(java):
                out.append(java[i + 1])
                i += 2
                continue
            ref = _BACK_REFERENCE.match(java, i) if char == "$" else None
            if ref is None:
                out.append(char)
                i += 1
                continue
            digits = ref.group(1)
            while len(digits) > 1 and int(digits) > groups:
                digits = digits[:-1]
            if int(digits) > groups:
                out.append(java[i:ref.end()])
            else:
                out.append(match.group(int(digits)) or "")
                out.append(ref.group(1)[len(digits):])
            i = ref.end()
        return "".join(out)

    return expand


class PrincipalMapper:
    def __init__(self, rules: str, key: str = "ssl.principal.mapping.rules") -> None:
        self.rules = _parse(rules, key)

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {dn!r}")


def _parse(text: str, key: str) -> list[_Rule]:
    rules: list[_Rule] = []
    for piece in (m.group(1) for m in _SPLITTER.finditer(text.strip())):
        match = _PARSER.match(piece)
        if match is None or match.end() != len(piece):
            raise ConfigError(key, f"invalid rule {piece!r}")
        if match.group(1):
            rules.append(_Rule(None))
        elif match.group(2) is not None:
            try:
                pattern = re.compile(match.group(2))
            except re.error as exc:
                raise ConfigError(key, f"invalid pattern in rule {piece!r}: {exc}") from None
            rules.append(_Rule(pattern, match.group(3), match.group(4)))
        elif piece.strip():
            raise ConfigError(key, f"invalid rule {piece!r}, expected RULE:pattern/replacement/[LU] or DEFAULT")
    return rules


def rfc2253(subject: Any) -> str:
    """`ssl.SSLSocket.getpeercert()['subject']` (RDNs in certificate order) as an RFC 2253 DN string,
    the form Java's X500Principal.getName() gives: the last RDN first, values escaped."""
    rdns = []
    for rdn in reversed(subject or ()):
        rdns.append("+".join(f"{SHORT_NAMES.get(attr, attr)}={_escape(str(value))}" for attr, value in rdn))
    return ",".join(rdns)


def _escape(value: str) -> str:
    out = "".join("\\" + char if char in ',+"\\<>;' else char for char in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
