"""Where a password sits in a storm root, by its position: a URL's
userinfo (``scheme://user:PASSWORD@host``, whatever the scheme and
however mistyped: ``postgresql:/``, ``postgresql//``), a URL's
``password=`` or ``sslpassword=`` query parameter, and a libpq
keyword/value string's ``password=`` value (quoted or not). ``shown``
masks each whole password by its place in the text, never by searching
for its text elsewhere (a short password would mask, and so reveal,
every other place its characters occur); ``without_password`` drops it.
Pure: text in, text out.

A password that breaks the URL's grammar (an ``@``, ``/``, ``?`` or ``&``
not percent-encoded) is masked as far as it could reach: the userinfo
ends at its last ``@`` (libpq stops at the first ``@`` or ``/``), a
parameter's value ends where the next libpq parameter begins; the mask
covers more, never less."""

from __future__ import annotations

import re

from .records import dataclass

#: the parameters that carry a secret (libpq's names; matched in any case)
SECRET_PARAMS = ("password", "sslpassword")
MASK = "***"
#: libpq's connection parameters: where one begins (``?KEY=`` or ``&KEY=`` in a URL's query, `` KEY=`` in a
#: keyword/value string) the value before it has ended
PARAMS = frozenset("""host hostaddr port dbname user password passfile require_auth channel_binding connect_timeout
    client_encoding options application_name fallback_application_name keepalives keepalives_idle keepalives_interval
    keepalives_count tcp_user_timeout replication gssencmode gsslib gssdelegation krbsrvname sslmode sslnegotiation
    sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni requirepeer
    ssl_min_protocol_version ssl_max_protocol_version min_protocol_version max_protocol_version service
    target_session_attrs load_balance_hosts""".split())

#: the forms a root takes
URL, MISTYPED, KEYWORDS, PATH = "url", "mistyped", "keywords", "path"
#: a scheme and what separates it from the rest: ``postgresql://``, ``postgresql:/``, ``postgresql//``, ``pg:``
_SCHEME = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]*)(:/*|//+)")
#: a keyword/value string's parameter: a libpq keyword and ``=`` at the start or after white space
_KEYWORD = re.compile(r"(?:^|(?<=\s))\s*([A-Za-z_]+)\s*=")
#: a URL query's parameter name, before its ``=`` (or a percent-encoded ``=``, ``%3D``)
_QUERY_KEY = re.compile(r"((?:[^=&%]|%(?!3[dD]))*)(?:=|%3[dD])")
#: a word of free text: up to white space
_WORD = re.compile(r"\S*")
#: where a URL may begin in free text: its start, or after white space, a quote, a bracket, ``=`` or ``-`` (``--URL``)
_WORD_START = re.compile(r"(?:^|(?<=[\s'\"(\[<{=,;-]))[A-Za-z][A-Za-z0-9+.-]*(?::/*|//+)")


@dataclass(frozen=True)
class Secret:
    """A password in a root: the characters ``start`` to ``end`` are the
    password; ``cut_start`` to ``cut_end`` what ``without_password`` cuts
    with it (its ``:`` before it in a userinfo; the whole ``&key=value``
    parameter in a query or a keyword/value string)."""

    start: int
    end: int
    cut_start: int
    cut_end: int


def form(root: str) -> str:
    """Which form ``root`` takes: ``URL`` (``postgresql://`` or
    ``postgres://``, libpq's), ``MISTYPED`` (a scheme and a separator
    libpq does not take, ``postgresql:/``, ``postgresql//``, ``pg:``, or a
    ``user:password@host`` with no scheme), ``KEYWORDS`` (libpq's
    ``host=... dbname=...``: a libpq keyword and ``=`` first) or ``PATH``."""
    if root.startswith(("postgresql://", "postgres://")):
        return URL
    found = _SCHEME.match(root)
    if found:
        word, colon = found.group(1).lower(), ":" in found.group(2)
        if word.startswith("postgres") or (colon and (word.startswith("pg") or "@" in root[found.end():])):
            return MISTYPED
    first = _KEYWORD.match(root)
    if first and first.group(1).lower() in PARAMS:
        return KEYWORDS
    return PATH


def secrets(root: str) -> list[Secret]:
    """Every password in ``root``, in order, by its position (see the
    module's words): a URL's (its query wherever a ``?`` begins one, a URL
    nested in a parameter's value), a keyword/value string's (whatever its
    first keyword), or the query of a root with no scheme."""
    scheme = _SCHEME.match(root)
    if scheme:
        bare = scheme.group(2) == ":" and not scheme.group(1).lower().startswith("postgres")  # user:password@host
        return _url_secrets(root, scheme.end(), bare)
    if _KEYWORD.match(root):
        return _keyword_secrets(root)
    return _url_secrets(root, 0, False, userinfo=False) if "?" in root else []


def shown(root: str) -> str:
    """``root`` as it may be shown: each password (``secrets``) replaced
    by ``***``, the rest as given."""
    for s in reversed(secrets(root)):
        root = root[:s.start] + MASK + root[s.end:]
    return root


def hidden(text: str) -> str:
    """Free text (an argument, a reason, a message quoting either) as it
    may be shown or recorded: every password ``shown`` masks in a root
    masked as ``***`` wherever it sits in ``text``: in a URL beginning at
    the start of the text or of a word (after white space, a quote, a
    bracket, ``=``, ``-``; it runs to the next such URL, or, without a
    scheme, ``user:password@host``, to the end of its word), in a
    keyword/value ``password=``, in a ``?`` or ``&`` query parameter;
    overlapping places are masked as one. Text that holds none is
    returned as it is. Linear in the text's length, near enough."""
    if "@" not in text and "=" not in text and "%3" not in text:
        return text
    spans = [(s.start, s.end) for s in _keyword_secrets(text)]
    after = len(text)  # where the next URL with a scheme begins
    for url in reversed(list(_WORD_START.finditer(text))):
        start = url.start()
        if url.group().endswith(":") and not url.group().lower().startswith("postgres"):
            end = _WORD.match(text, start).end()  # user:password@host without a scheme: one word, not "note: x@y"
        else:  # to the next URL, as a root's URL runs to its end
            end, after = after, start
        spans += [(s.start + start, s.end + start) for s in secrets(text[start:end])]
    for at in (i for i, c in enumerate(text) if c in "?&" and _is_param(text, i + 1, SECRET_PARAMS)):
        value = _QUERY_KEY.match(text, at + 1).end()
        spans.append((value, next((i for i in range(value, len(text)) if text[i].isspace()
                                   or (text[i] == "&" and _is_param(text, i + 1))), len(text))))
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        text = text[:start] + MASK + text[end:]
    return text


def without_password(root: str) -> str:
    """``root`` as it may be recorded: each password cut out with what
    carries it (a userinfo's ``:PASSWORD``, a ``password=`` parameter
    whole); ``.pgpass``, ``PGPASSFILE`` or a service file give the
    password to whoever uses it next."""
    for s in reversed(secrets(root)):
        root = root[:s.cut_start] + root[s.cut_end:]
    return root


def _is_param(text: str, at: int, names: frozenset[str] | tuple[str, ...] = PARAMS) -> bool:
    """Whether a URL query parameter named in ``names`` (percent-decoded, any case) begins at ``at``."""
    from urllib.parse import unquote

    key = _QUERY_KEY.match(text, at)
    return key is not None and unquote(key.group(1)).strip().lower() in names


def _url_secrets(url: str, start: int, bare: bool, userinfo: bool = True) -> list[Secret]:
    """The passwords of a URL whose authority begins at ``start``: the
    query begins at the first ``?`` that a libpq parameter follows, else
    at the first ``?`` after the last ``@``; the userinfo (unless not
    ``userinfo``: a root with no scheme) ends at the last ``@`` before
    it, its password after its first ``:`` (``bare``: after the scheme's
    ``:`` itself, when what looks like a scheme may be the user of
    ``user:password@host``). A parameter ends where a ``&`` or a ``?``
    that a libpq parameter follows begins the next; a parameter's value
    that is a URL has that URL's passwords too."""
    query = next((i for i, c in enumerate(url) if i >= start and c == "?" and _is_param(url, i + 1)), -1)
    if query < 0:
        query = url.find("?", max(start, url.rfind("@", start) + 1))
        query = len(url) if query < 0 else query
    out = []
    at = url.rfind("@", start, query) if userinfo else -1
    if at >= 0:
        colon = start - 1 if bare else url.find(":", start, at)
        if colon >= 0:
            out.append(Secret(colon + 1, at, colon, at))
    pos = query + 1
    while pos <= len(url) and query < len(url):
        end = next((i for i in range(pos, len(url)) if url[i] in "&?" and _is_param(url, i + 1)), len(url))
        key = _QUERY_KEY.match(url, pos, end)
        if key is not None and _is_param(url, pos, SECRET_PARAMS):
            value = key.end()
            out.append(Secret(value, end, pos - 1 if end == len(url) else pos, end if end == len(url) else end + 1))
        elif key is not None and _SCHEME.match(url, key.end()):  # a URL given as a value (dbname=postgresql://...)
            value = key.end()
            out += [Secret(s.start + value, s.end + value, s.cut_start + value, s.cut_end + value)
                    for s in secrets(url[value:end])]
        pos = end + 1
    return out


def _keyword_secrets(text: str) -> list[Secret]:
    """The passwords of a libpq keyword/value string: a quoted value ends
    at its closing quote (``\\'`` and ``\\\\`` escaped), an unquoted one at
    white space, but a password's where the next libpq keyword begins."""
    out, pos = [], 0
    while True:
        key = _KEYWORD.search(text, pos)
        if key is None:
            return out
        name, value = key.group(1).lower(), len(text) - len(text[key.end():].lstrip())
        if text.startswith("'", value):
            end = value + 1
            while end < len(text) and text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, len(text))
        elif name in SECRET_PARAMS:
            later = next((k for k in _KEYWORD.finditer(text, value) if k.group(1).lower() in PARAMS), None)
            end = len(text) if later is None else max(value, len(text[:later.start(1)].rstrip()))
            if end == value:  # "password= dbname=x": libpq reads the next word as the password
                end = next((i for i in range(value, len(text)) if text[i].isspace()), len(text))
        else:
            end = value
            while end < len(text) and not text[end].isspace():
                end += 2 if text[end] == "\\" else 1
            end = min(end, len(text))
        if name in SECRET_PARAMS:
            out.append(Secret(value, end, key.start(), end))
        elif name in PARAMS and _SCHEME.match(text, value):  # a URL given as a value (dbname=postgresql://...)
            out += [Secret(s.start + value, s.end + value, s.cut_start + value, s.cut_end + value)
                    for s in secrets(text[value:end])]
        pos = max(end, key.end() + (key.end() == key.start()))


def keyword_pairs(text: str) -> list[tuple[str, str]]:
    """A keyword/value string's parameters, as libpq reads them (a quoted
    value unquoted and unescaped); what cannot be read is left out."""
    pairs, pos = [], 0
    while True:
        key = _KEYWORD.search(text, pos)
        if key is None:
            return pairs
        value, pos = [], len(text) - len(text[key.end():].lstrip())
        quoted = text.startswith("'", pos)
        pos += quoted
        while pos < len(text) and (text[pos] != "'" if quoted else not text[pos].isspace()):
            if text[pos] == "\\" and pos + 1 < len(text):
                pos += 1
            value.append(text[pos])
            pos += 1
        pos += quoted
        pairs.append((key.group(1), "".join(value)))


def as_url(text: str) -> str:
    """The URL a keyword/value string's parameters make, without its
    passwords: ``postgresql://USER@HOST:PORT/DBNAME?OTHER=...``, each part
    percent-encoded (a socket directory, or several hosts, as ``host=``)."""
    from urllib.parse import quote

    given = {k: v for k, v in keyword_pairs(text) if k.lower() not in SECRET_PARAMS}
    user, db = given.pop("user", ""), given.pop("dbname", "")
    host = given.get("host", "")
    netloc = ""
    if host and all(c not in host for c in "/,:"):
        netloc = quote(given.pop("host"), safe="")
        if given.get("port", "").isdigit():
            netloc += ":" + given.pop("port")
    rest = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in given.items())
    return (f"postgresql://{quote(user, safe='') + '@' if user else ''}{netloc}/{quote(db, safe='')}"
            + (f"?{rest}" if rest else ""))


def kept_words(message: str, root: str) -> str:
    """libpq's ``message`` about ``root`` with each double-quoted part kept
    only where it is ``root`` (then shown masked) or part of ``shown(root)``,
    else ``"..."``: libpq quotes the pieces of a root it cannot read,
    pieces of its password among them."""
    masked = shown(root)

    def part(found: re.Match) -> str:
        inner = found.group(1)
        if inner == root:
            return f'"{masked}"'
        return found.group(0) if inner in masked else '"..."'

    return re.sub(r'"([^"]*)"', part, message)
