"""Token-shaped secrets inside a text (API keys, access tokens, passwords in URLs and netrc lines), replaced by
``[secret redacted]`` before anything stores, embeds or prints the text.

:func:`kenning.walk.screen` calls :func:`redact` on every file's text, so the index, grep, symbols and, through
them, the daemon and MCP never hold or hand out the value itself, while the rest of the file stays searchable
(``aws_secret_access_key`` still finds the config that sets it). Only the value is replaced, inside its line,
so line numbers and every other line are exactly the file's.

Detection is detect-secrets' plugins, used directly: each plugin's ``analyze_string`` on one line, without its
baseline, git, filter or verification machinery (nothing here goes to the network). Only plugins that match a
token's own shape are on: AWS key ids and keys assigned to an aws name, GitHub, GitLab, Stripe, Slack, OpenAI,
PyPI, npm, SendGrid, Square, Azure storage and Mailchimp keys, JWTs, and passwords in URLs. The high-entropy
string and keyword plugins are off: they flag ordinary hashes, ids and ``password = get_password()``. Some rules
are kenning's own (:data:`_OWN`), for shapes no plugin reads: a netrc line (``machine HOST login USER password
PASS``); an AWS secret key assigned without quotes (a credentials file, YAML, ``export``), which the plugin
only finds quoted; a URL's password with an empty user (``redis://:PW@host``); GitHub fine-grained tokens
(``github_pat_``), Anthropic keys (``sk-ant-``), Stripe test keys (``sk_test_``, ``rk_test_``) and OpenAI's
project, service-account, admin and 48-character ``sk-`` keys. Private key blocks are the walk's
(:func:`kenning.walk.holds_private_key`): a file holding one is not read at all.

Cost: substring tests of the file's bytes for cheap hints (literals one of which every match must contain);
only lines holding a hint meet the plugins, and detect-secrets (which imports ``requests``) is imported on the first such
line, so most files, and most runs, never load it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Any, Protocol, cast

__all__ = ["MARK", "VERSION", "redact"]

MARK = "[secret redacted]"
# Part of the index's settings: a change to what is detected re-reads every file on the next run.
VERSION = 2

# Literals, in lower case, one of which every match of the plugins below (and of the netrc rule) contains, with a
# second literal its line must then hold too, or "": a line without them holds nothing any of them would report,
# so it is never handed to them. Looked for in the lowered text (a superset of what the case-sensitive plugins
# need, and the case-insensitive ones, "aws" or "xox", cost one scan, not one per spelling). Plain substring
# tests: Python's regex engine scans text ~20x slower than `in` does.
_HINTS: tuple[tuple[str, str], ...] = (
    *((n, "") for n in ("akia", "asia", "abia", "acca", "a3t", "aws")),  # AWS
    *((f"gh{c}_", "") for c in "pousr"),  # GitHub
    *((f"{n}-", "") for n in ("glpat", "gldt", "glft", "glsoat", "glrt")),  # GitLab
    ("k_live_", ""),  # Stripe
    ("eyj", "."),  # JWT
    ("://", "@"),  # a password in a URL
    ("xox", ""),  # Slack
    ("hooks.slack.com", ""),
    *((n, "") for n in ("t3blbkfj", "pypi-ag", "_authtoken", "sg.", "sq0csp-", "accountkey=", "-us")),
    ("machine", "password"),  # netrc
    ("github_pat_", ""),
    ("sk-", ""),  # Anthropic, OpenAI
    ("k_test_", ""),  # Stripe test keys
)
_FIRST = tuple(dict.fromkeys(n for n, _ in _HINTS))
_FIRST_BYTES = tuple(n.encode() for n in _FIRST)
# kenning's own rules: the value is group 1 when there is one (after a label), else the whole match.
_OWN = (
    re.compile(r"(?i)\bmachine\s+\S+(?:\s+(?:login|account)\s+\S+)*\s+password\s+(\S+)"),  # netrc
    # An AWS secret key after an aws...secret/key/token name and `=` or `:`, quoted or not (the plugin wants
    # quotes): `aws_secret_access_key = X`, `aws_secret_access_key: X`, `export AWS_SECRET_ACCESS_KEY=X`.
    re.compile(
        r"(?i)aws[\w.-]{0,20}?(?:secret|key|token|pass)[\w.-]{0,20}?[\"']?\s*[:=]\s*[\"']?"
        r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
    ),
    re.compile(r"://:([^\s/@:]+)@"),  # a URL's password with no user (redis://:PW@host)
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    re.compile(r"\b[rs]k_test_[0-9a-zA-Z]{24,}"),
    re.compile(r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}"),
    re.compile(r"\bsk-[A-Za-z0-9]{48}(?![A-Za-z0-9_-])"),  # OpenAI's older user keys
)
# A plugin may match a token's head only (the JWT plugin stops before the signature): the rest of the same run of
# token characters goes with it.
_TAIL = re.compile(r"[A-Za-z0-9_\-.+/=]*")


class _Plugin(Protocol):
    denylist: Iterable[re.Pattern[str]]

    def analyze_string(self, string: str) -> Iterable[str]: ...


@cache
def _plugins() -> tuple[_Plugin, ...]:
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector

    plugins = (
        AWSKeyDetector, AzureStorageKeyDetector, BasicAuthDetector, GitHubTokenDetector, GitLabTokenDetector,
        JwtTokenDetector, MailchimpDetector, NpmDetector, OpenAIDetector, PypiTokenDetector, SendGridDetector,
        SlackDetector, SquareOAuthDetector, StripeDetector,
    )  # fmt: skip
    return tuple(cast(_Plugin, plugin()) for plugin in plugins)


def _spans(line: str) -> list[tuple[int, int]]:
    """Where the secrets of one line are (start, end), by character."""
    spans = [m.span(1 if rule.groups else 0) for rule in _OWN for m in rule.finditer(line)]
    for plugin in _plugins():
        # analyze_string is the plugin's verdict (with its own checks, such as a JWT's being valid JSON), but it
        # gives values, not places, and a capturing group's value at that: "ghp" for a whole GitHub token. So
        # each of its patterns is matched again here, and a match it vouched for is placed: its first group when
        # that group is the value after a label (a URL's password, an assigned AWS key), else the whole match
        # (the group was the token's own prefix).
        values = set(plugin.analyze_string(line))
        if not values:
            continue
        for regex in plugin.denylist:
            for m in regex.finditer(line):
                if not values.intersection(g for g in (m.group(0), *m.groups()) if g):
                    continue
                group = next((i for i in range(1, regex.groups + 1) if m.group(i)), None)
                spans.append(m.span(group) if group is not None and m.start(group) > m.start() else m.span())
    return spans


def _redact_line(line: str) -> str:
    spans = _spans(line)
    if not spans:
        return line
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        tail = _TAIL.match(line, end)
        end = tail.end() if tail is not None and end - start >= 8 else end  # never a short value's word
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[str] = []
    done = 0
    for start, end in merged:
        out += (line[done:start], MARK)
        done = end
    out.append(line[done:])
    return "".join(out)


def _lower_in_place(line: str) -> str:
    low = line.lower()
    return low if len(low) == len(line) else "".join(c if len(c.lower()) != 1 else c.lower() for c in line)


@cache
def _any_hint() -> Any:
    """Every first hint in one case-insensitive RE2 pattern over bytes: 11 ms for the 5,000 files of the speed
    bench where testing the hints one by one took 148 ms (a fifth of the whole lexical pass). RE2's case folding
    is Unicode's, a superset of bytes.lower's: at worst a file goes on to the exact test below."""
    import re2

    return re2.compile(b"(?i)" + b"|".join(re.escape(h) for h in _FIRST_BYTES))


def redact(text: str, raw: bytes | None = None) -> str:
    """The text with every detected secret value replaced by MARK; the same object when there is none.

    ``raw``, the bytes the text was decoded from, is looked at first when given: testing bytes is faster than
    testing text that holds any non-ASCII character. It must be ASCII-compatible (UTF-8, cp1252, latin-1; not
    UTF-16), so that each hint is in the bytes exactly when it is in the text.
    """
    if raw is not None:
        if _any_hint().search(raw) is None:
            return text  # most files: one linear RE2 scan for all the hints, not one `in` test each
        low = raw.lower()  # bytes.lower changes ASCII letters only, one byte for one
        present = {n for n, b in zip(_FIRST, _FIRST_BYTES, strict=True) if b in low}
        if not present:
            return text
    hay = text.lower()
    if raw is None:
        present = {n for n in _FIRST if n in hay}
        if not present:
            return text
    if len(hay) != len(text):  # a letter that lowers to two (U+0130): keep it, so offsets stay the text's
        hay = "\n".join(_lower_in_place(line) for line in text.split("\n"))
    starts: set[int] = set()
    for first, second in _HINTS:
        if first not in present:
            continue
        at = hay.find(first)
        while at >= 0:
            start = hay.rfind("\n", 0, at) + 1
            end = hay.find("\n", at)
            end = len(hay) if end < 0 else end
            if not second or hay.find(second, start, end) >= 0:
                starts.add(start)
            at = hay.find(first, end)  # the next line holding it: one visit per line is enough
    out: list[str] = []
    done = 0  # text[:done] is settled
    for start in sorted(starts):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end]
        clean = _redact_line(line)
        if clean != line:
            out += (text[done:start], clean)
            done = end
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)
