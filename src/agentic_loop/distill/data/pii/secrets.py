"""Credentials in text: the rules of ``detect-secrets``, plus the key formats it does not know.

People paste API keys, tokens and passwords into agents; a dataset that
carries one hands it to whoever trains on it. :class:`SecretScanner` finds
them with no model and no network, so it runs in every PII mode (``"off"``
included) and again on the redacted text, where any hit drops the record.

The rule set is Yelp's ``detect-secrets`` (Apache-2.0): its regex plugins
(AWS, Azure storage, GitHub, GitLab, Slack, Stripe, JWT, private keys,
basic-auth URLs, npm, PyPI, SendGrid, Twilio...) and its keyword plugin,
run line by line as it does. Added here, for what it lacks or catches only
in part: OpenAI project and Anthropic keys, Google API keys and
service-account JSON, Hugging Face and fine-grained GitHub tokens, Azure
connection strings and SAS signatures, whole private-key blocks (the plugin
flags the header line only), ``scheme://user:pass@host`` (user and password),
an AWS secret key near the word "aws", and any high-entropy token next to
key / token / secret / password (entropy by ``detect-secrets``' own measure).
A hit is widened to the whole token around it: a plugin that reports a
prefix (a JWT's first two parts, a Stripe key's first 24 characters) does
not leave the rest of the key behind.

Example:
    >>> scanner = SecretScanner()
    >>> text = "export OPENAI_API_KEY=sk-proj-4fQ9xT2mZr8LwP1vKd7sYb3NcHe6UjAq0GiRo5Tz"
    >>> [(text[h.start:h.end][:8], h.rule) for h in scanner.find(text)]
    [('sk-proj-', 'agentic-loop:openai_key')]
    >>> scanner.find("Version 2.4.1 shipped on 2024-05-01.")
    []
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from presidio_analyzer import EntityRecognizer

__all__ = ["SECRET", "DETECT_SECRETS_PLUGINS", "SecretHit", "SecretScanner",
           "secret_recognizer", "shannon_entropy"]

#: The entity type (and placeholder ``<SECRET>``) every credential is replaced by.
SECRET = "SECRET"

#: detect-secrets plugins run by the scanner (its entropy-only plugins fire on any quoted
#: hash, and its public-IP plugin is Presidio's IP_ADDRESS: those three are left out).
DETECT_SECRETS_PLUGINS: tuple[str, ...] = (
    "AWSKeyDetector", "ArtifactoryDetector", "AzureStorageKeyDetector", "BasicAuthDetector",
    "CloudantDetector", "DiscordBotTokenDetector", "GitHubTokenDetector", "GitLabTokenDetector",
    "IbmCloudIamDetector", "IbmCosHmacDetector", "JwtTokenDetector", "KeywordDetector",
    "MailchimpDetector", "NpmDetector", "OpenAIDetector", "PrivateKeyDetector",
    "PypiTokenDetector", "SendGridDetector", "SlackDetector", "SoftlayerDetector",
    "SquareOAuthDetector", "StripeDetector", "TelegramBotTokenDetector", "TwilioKeyDetector",
)

# what the gate writes in place of a finding: "password: <SECRET>" is no credential
_PLACEHOLDER = re.compile(r"<[A-Z_]+>")
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-+/=.~]")
_KEYWORD = (r"(?<![A-Za-z0-9])(?:api[_ -]?key|access[_ -]?key|"
            r"secret(?:[_ -]?(?:access[_ -]?)?key)?|client[_ -]?secret|token|bearer|"
            r"auth(?:orization)?|credentials?|passw(?:or)?d|"
            r"passphrase|pwd|private[_ -]?key|signing[_ -]?key|key)")
# (rule, pattern, group holding the secret); every pattern is matched on the whole text
_RULES: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("anthropic_key", re.compile(r"\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_\-]{20,}"), 0),
    ("openai_key", re.compile(
        r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}(?:T3BlbkFJ[A-Za-z0-9_\-]+)?"),
     0),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), 0),
    ("gcp_service_account", re.compile(
        r"\"private_key(?:_id)?\"\s*:\s*\"([^\"]{16,})\"", re.S), 1),
    ("github_token", re.compile(r"\b(?:github_pat_[A-Za-z0-9_]{40,}|gh[pousr]_[A-Za-z0-9]{30,})"),
     0),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), 0),
    ("slack_token", re.compile(r"\bxox[abposre]-[A-Za-z0-9\-]{10,}"), 0),
    ("stripe_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"), 0),
    ("aws_access_key_id", re.compile(r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"), 0),
    ("aws_secret_key", re.compile(
        r"(?:(?i:aws|secret)|AKIA|ASIA)[^\n]{0,60}?(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})"
        r"(?![A-Za-z0-9/+=])"), 1),
    ("aws_secret_key", re.compile(
        r"(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])[^\n]{0,60}?(?:(?i:aws)|AKIA)"),
     1),
    ("azure_connection_string", re.compile(
        r"(?i:(?:AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd|sig)\s*=\s*)"
        r"([^;\s\"']{8,})"), 1),
    ("private_key_block", re.compile(
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S), 0),
    ("url_credentials", re.compile(r"(?<=://)([^\s:/@]*:[^\s/@]+)(?=@)"), 1),  # redis://:pw@
    ("password_value", re.compile(
        r"(?i:\b(?:passw(?:or)?d|passphrase|pwd|pin)\b)(?:\s+(?:is|was|=|:)|\s*[:=])\s*"
        r"[\"'`]?([^\s\"'`]{6,})"), 1),
    ("keyword_entropy", re.compile(
        rf"(?i:{_KEYWORD})(?:\s+(?:is|was|=|:)|\s*[:=]|\s)\s*[\"'`]?([A-Za-z0-9_\-+/=.~]{{8,}})"),
     1),
)


#: Rules that look at what follows a keyword rather than at a known key format.
_GENERIC = frozenset({"password_value", "keyword_entropy"})


@dataclass(frozen=True)
class SecretHit:
    """Where a credential sits in a text and which rule found it (never the value)."""

    start: int
    end: int
    rule: str


def shannon_entropy(token: str) -> float:
    """Bits per character of ``token``, as ``detect-secrets`` measures it.

    >>> round(shannon_entropy("aaaa"), 2), round(shannon_entropy("a1B2c3D4"), 2)
    (0.0, 3.0)
    """
    if not token:
        return 0.0
    counts = Counter(token)
    return max(0.0, -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values()))


def _looks_random(token: str, *, password: bool = False) -> bool:
    """Whether a token next to a keyword is a credential rather than a word or a version.

    A password only needs a digit or a symbol; other values need mixed
    character classes and at least 3 bits of entropy per character.
    """
    classes = sum(bool(re.search(p, token))
                  for p in (r"[a-z]", r"[A-Z]", r"[0-9]", r"[^A-Za-z0-9]"))
    if re.fullmatch(r"[\d.\-/:]+", token) or re.fullmatch(r"v?\d+(?:\.\d+)+\w*", token):
        return False  # a number, date or version
    if password:
        return classes >= 2 and bool(re.search(r"[0-9]|[^A-Za-z0-9]", token))
    return len(token) >= 12 and classes >= 2 and shannon_entropy(token) >= 3.0


@lru_cache(maxsize=1)
def _plugins() -> tuple[Any, ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    by_name: dict[str, Any] = {plugin.__name__: plugin for plugin in classes}
    return tuple(by_name[name]() for name in DETECT_SECRETS_PLUGINS if name in by_name)


def detect_secrets_version() -> str:
    """The installed ``detect-secrets`` version (recorded in dataset manifests).

    >>> detect_secrets_version().count(".") >= 1
    True
    """
    from detect_secrets.__version__ import VERSION

    return str(VERSION)


class SecretScanner:
    """Finds credentials in text; pure Python, so it runs in every mode (see module docstring)."""

    def describe(self) -> dict[str, Any]:
        """The rule set, JSON-ready: source, version, plugins and the rules added here."""
        return {"source": "detect-secrets (PyPI, Yelp, Apache-2.0)",
                "version": detect_secrets_version(),
                "plugins": [type(p).__name__ for p in _plugins()],
                "added_rules": list(dict.fromkeys(name for name, _, _ in _RULES))}

    def find(self, text: str) -> list[SecretHit]:
        """Every credential in ``text``, widened to whole tokens, one hit per span, by position."""
        by_span: dict[tuple[int, int], SecretHit] = {}
        hits = [*self._own_rules(text, generic=False), *self._plugin_hits(text),
                *self._own_rules(text, generic=True)]
        for h in hits:  # the first, most specific rule names a span
            if re.search(r"\w", _PLACEHOLDER.sub("", text[h.start:h.end])):
                by_span.setdefault((h.start, h.end), h)
        return sorted(by_span.values(), key=lambda h: (h.start, -h.end))

    def _own_rules(self, text: str, *, generic: bool) -> Iterator[SecretHit]:
        for name, pattern, group in _RULES:
            if (name in _GENERIC) != generic:
                continue
            for match in pattern.finditer(text):
                start, end = match.span(group)
                value = match.group(group).rstrip(".,;:!?)]}")
                if name == "keyword_entropy" and not _looks_random(value):
                    continue
                if name == "password_value" and not _looks_random(value, password=True):
                    continue
                if name not in ("private_key_block", "url_credentials"):
                    start, end = _widen(text, start, end)
                yield SecretHit(start, end, f"agentic-loop:{name}")

    def _plugin_hits(self, text: str) -> Iterator[SecretHit]:
        offset = 0
        for line in text.splitlines(keepends=True):
            for plugin in _plugins():
                for value in plugin.analyze_string(line):
                    if not value or not value.strip():
                        continue
                    rule = f"detect-secrets:{type(plugin).__name__}"
                    for match in re.finditer(re.escape(value), line):
                        start, end = _widen(line, *match.span())
                        yield SecretHit(offset + start, offset + end, rule)
            offset += len(line)


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """Grow ``[start, end)`` over adjacent token characters; a trailing dot or dash stays out."""
    while start > 0 and _TOKEN_CHAR.match(text[start - 1]) and text[start - 1] not in ".=":
        start -= 1
    while end < len(text) and _TOKEN_CHAR.match(text[end]):
        end += 1
    while end > start + 1 and text[end - 1] in ".-":
        end -= 1
    return start, end


def secret_recognizer(scanner: SecretScanner | None = None,
                      supported_language: str = "en") -> EntityRecognizer:
    """The scanner as a Presidio recognizer (``SECRET``, score 1.0, the rule as recognizer name).

    >>> r = secret_recognizer()
    >>> [x.entity_type for x in r.analyze("token ghp_4fQ9xT2mZr8LwP1vKd7sYb3NcHe6UjAq0GiR", [])]
    ['SECRET']
    """
    from presidio_analyzer import EntityRecognizer, RecognizerResult

    found = scanner or SecretScanner()

    class SecretRecognizer(EntityRecognizer):
        def load(self) -> None:
            """Nothing to load: the rules are compiled at import."""

        def analyze(self, text: str, entities: list[str],
                    nlp_artifacts: object = None) -> list[RecognizerResult]:
            return [RecognizerResult(
                SECRET, hit.start, hit.end, 1.0,
                recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: hit.rule})
                for hit in found.find(text)]

    return SecretRecognizer(supported_entities=[SECRET], name="SecretRecognizer",
                            supported_language=supported_language)
