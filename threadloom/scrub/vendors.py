"""Credential shapes with a documented prefix or form, one rule each, most specific first.

Each pattern is written here from the vendor's published format, or, where a vendor publishes none,
from the shape public secret scanners use for it:
- gitleaks' rule set, config/gitleaks.toml at b58d3f1 (github.com/gitleaks/gitleaks): the shapes of
  AWS access key ids, GCP API keys, Azure AD client secrets, OpenAI, Anthropic, Stripe, Slack, Twilio,
  SendGrid, GitLab, npm, PyPI, Hugging Face, DigitalOcean, Shopify, Linear, Databricks, Perplexity,
  JWTs and PEM private-key blocks.
- GitHub's token prefixes (ghp_, gho_, ghu_, ghs_, ghr_; up to 255 characters):
  github.blog/changelog/2021-03-31-authentication-token-format-updates-are-generally-available;
  fine-grained tokens are github_pat_ + 22 + _ + 59 characters.
- Bitbucket/Atlassian prefixes (API token ATAT, app password ATBB, access tokens ATCT), confirmed by
  Atlassian staff at community.atlassian.com/forums/Bitbucket-questions/Can-we-confirm-BitBucket-s-token-prefixes.
- Docker Hub personal access tokens (dckr_pat_; organisation tokens dckr_oat_): docs.docker.com,
  "Create personal access token" in the Hub API reference.
- Google OAuth client secrets (GOCSPX-) and access tokens (ya29.), as Google's console issues them.
- Azure storage connection strings (AccountKey=, SharedAccessSignature=, a SAS URL's sig=).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Rule:
    """A credential shape. `needles`: literal text one of which every match contains (in the lower-case
    text when `folded`), checked before the pattern runs, so text without them costs a substring search.
    The pattern's group `s`, when it has one, is the part replaced; otherwise the whole match is, plus
    `back` characters before it. `bounded`: a match right after a letter, digit, _ or - is part of a
    longer word, not this credential."""

    kind: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...]
    folded: bool = False
    bounded: bool = False
    back: int = 0


# A token ends where its alphabet does. Where it starts is checked after the match (`bounded`): a
# look-behind first in the pattern would cost the regex engine its fast scan for the literal prefix, so
# every pattern here begins with a literal.
TOKEN_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_END = r"(?![A-Za-z0-9_-])"


def _rule(kind: str, pattern: str, *needles: str, folded: bool = False, back: int = 0) -> Rule:
    return Rule(kind, re.compile(pattern), needles, folded, back=back)


def _token(kind: str, prefix: str, body: str) -> Rule:
    """A token that starts with the literal `prefix`, followed by `body`, standing alone."""
    return Rule(kind, re.compile(re.escape(prefix) + body + _END), (prefix,), bounded=True)


# Private keys: PEM (PKCS#1, PKCS#8, EC, DSA, encrypted), OpenSSH and PGP, also JSON-escaped (a GCP
# service-account file's "private_key": "-----BEGIN PRIVATE KEY-----\nMIIE..."). The engine looks for
# the END line itself (`private_key_end`); a block cut before it is scrubbed as far as its key material
# runs (base64 lines and header lines such as `DEK-Info: ...`).
PRIVATE_KEY_BEGIN: Final = re.compile(r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
PRIVATE_KEY_END: Final = re.compile(r"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
PRIVATE_KEY_BODY: Final = re.compile(r"(?:(?:\s|\\n)*(?:[A-Za-z0-9+/=]{16,}|[A-Za-z-]+: [^\n\\]*))*")
MAX_PRIVATE_KEY_CHARS: Final = 20_000


def private_key_end(text: str, begin: re.Match[str], end: int) -> int:
    """Where the private key that `begin` opens ends; `end`: where the next END line starts, or -1."""
    closing = PRIVATE_KEY_END.match(text, end) if 0 <= end - begin.end() <= MAX_PRIVATE_KEY_CHARS else None
    if closing is not None:
        return closing.end()
    body = PRIVATE_KEY_BODY.match(text, begin.end())
    return body.end() if body is not None else begin.end()


VENDOR_RULES: Final = (
    # A PuTTY key file's private part: its Private-Lines header and the base64 lines that follow.
    _rule("private-key", r"Private-Lines: \d+(?:\r?\n[A-Za-z0-9+/=]+)+", "Private-Lines: "),
    # AI vendors. Anthropic before OpenAI: both begin with sk-.
    _token("anthropic-key", "sk-ant-", r"(?:api|admin|oat|ort)\d\d-[A-Za-z0-9_-]{20,}"),
    _token(
        "openai-key",
        "sk-",
        r"(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|[A-Za-z0-9]{48})",
    ),
    _token("huggingface-token", "hf_", r"[A-Za-z]{34}"),
    _token("huggingface-token", "api_org_", r"[A-Za-z]{34}"),
    _token("groq-key", "gsk_", r"[A-Za-z0-9]{48,56}"),
    _token("xai-key", "xai-", r"[A-Za-z0-9]{60,90}"),
    _token("perplexity-key", "pplx-", r"[A-Za-z0-9]{48}"),
    _token("replicate-token", "r8_", r"[A-Za-z0-9]{37}"),
    # Code hosts and registries.
    _token("github-token", "gh", r"[pousr]_[A-Za-z0-9]{36,251}"),
    _token("github-token", "github_pat_", r"[A-Za-z0-9_]{70,251}"),
    _token("gitlab-token", "gl", r"(?:pat|dt|ptt|rt|oas|cbt|ft|imt|soat|agent|ffct)-[A-Za-z0-9_.-]{20,300}"),
    _token("gitlab-token", "GR1348941", r"[A-Za-z0-9_-]{20}"),
    _token("bitbucket-token", "AT", r"(?:BB|AT|CT)[A-Za-z0-9_=.+/-]{24,300}"),
    _token("npm-token", "npm_", r"[A-Za-z0-9]{36}"),
    _token("pypi-token", "pypi-AgE", r"[A-Za-z0-9_-]{50,1000}"),
    _token("docker-token", "dckr_", r"(?:pat|oat)_[A-Za-z0-9_-]{20,60}"),
    # Cloud providers.
    *(_token("aws-access-key-id", prefix, r"[A-Z2-7]{16}") for prefix in ("AKIA", "ASIA", "ABIA", "ACCA")),
    _token("aws-access-key-id", "A3T", r"[A-Z0-9][A-Z2-7]{16}"),
    _token("gcp-api-key", "AIza", r"[A-Za-z0-9_-]{35}"),
    _token("google-oauth-secret", "GOCSPX-", r"[A-Za-z0-9_-]{28}"),
    _token("google-oauth-token", "ya29.", r"[A-Za-z0-9_-]{20,}"),
    _token("google-oauth-token", "1//0", r"[A-Za-z0-9_-]{40,}"),
    _rule("azure-storage-key", r"AccountKey\s*=\s*(?P<s>[A-Za-z0-9+/]{40,}={0,2})", "AccountKey"),
    _rule("azure-storage-key", r"SharedAccessKey\s*=\s*(?P<s>[A-Za-z0-9+/]{40,}={0,2})", "SharedAccessKey"),
    _rule("azure-sas-signature", r"sig=(?<=[?&;]sig=)(?P<s>[A-Za-z0-9%+/=]{30,})", "sig="),
    # An Azure AD client secret: three characters, a digit, Q~, then 31-34 more.
    _rule("azure-client-secret", r"Q~(?<=[A-Za-z0-9_~.]{3}\dQ~)[A-Za-z0-9_~.-]{31,34}" + _END, "Q~", back=4),
    _token("digitalocean-token", "do", r"[opr]_v1_[a-f0-9]{64}"),
    _token("databricks-token", "dapi", r"[a-f0-9]{32}(?:-\d)?"),
    # Payments, messaging and other APIs.
    _token("stripe-key", "sk_", r"(?:test|live|prod)_[A-Za-z0-9]{10,99}"),
    _token("stripe-key", "rk_", r"(?:test|live|prod)_[A-Za-z0-9]{10,99}"),
    _token("stripe-webhook-secret", "whsec_", r"[A-Za-z0-9]{32,}"),
    _rule("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[\w+/-]{20,})", "hooks.slack"),
    _token("slack-token", "xox", r"[abposre]-[A-Za-z0-9-]{10,250}"),
    _token("slack-token", "xapp-", r"\d-[A-Za-z0-9-]{20,}"),
    _token("twilio-key", "SK", r"[0-9a-fA-F]{32}"),
    _token("sendgrid-key", "SG.", r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    _token("shopify-token", "shp", r"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    _token("linear-key", "lin_api_", r"[A-Za-z0-9]{40}"),
    _token("mailgun-key", "key-", r"[a-f0-9]{32}"),
    # JSON Web Tokens: a base64url JSON header ({" is eyJ), a payload, and a signature.
    _token("jwt", "eyJ", r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
)
