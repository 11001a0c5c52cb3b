"""What a config error may show of a value: never something shaped like a credential.

A value pasted into the wrong key (a private key as a host key, a URL with `user:password@` as a mirror endpoint, a
kubeconfig as an output path) would otherwise be quoted back whole by the error report, and from there reach CI
logs. Every report line passes through `redacted`: each credential shape is replaced by its name in brackets, so
the reader still learns what was pasted where. Applied to the whole line, it covers every check's wording at once.
"""

from __future__ import annotations

import re

# PEM and OpenSSH blocks (private keys, certificates), whole or cut short; in a quoted value newlines read `\n`.
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|(?=[\"'])|$)", re.DOTALL)
# user[:password]@ after a scheme.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@\"'?#]+@")
# user:password@ with no scheme (pasted into a host field: an NFS server, an endpoint without https://).
_BARE_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])[^\s@\"':/\[\]]+:[^\s@\"'/]+@(?=[A-Za-z0-9\[])")
# Authorization header values.
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}")
# key: value / key=value pairs whose key names a credential (kubeconfig users, env files, connection strings);
# not a bare `secret`, which the reports' own prose uses ("must be set as a secret: pulumi config set …").
_NAMED = re.compile(
    r"(?i)\b((?:client-key|client-certificate|certificate-authority)-data|token|password|passwd|"
    r"api[-_]?key|access[-_]?key|secret[-_]?key|client[-_]?secret|private[-_]?key)"
    r"(\\?[\"']?\s*[:=]\s*\\?[\"']?)[^\s\"',}\\]+"
)
# A command-line flag naming a credential, its value after a blank (`--password hunter2`); not `--secret`, which the
# reports' own advice uses (`pulumi config set --secret`), and not a next flag.
_FLAG = re.compile(
    r"(?i)(--(?:password|passwd|pass|token|api[-_]?key|access[-_]?key|secret[-_]?key|client[-_]?secret|"
    r"private[-_]?key)\\?[\"']?\s+\\?[\"']?)[^\s\"',}\\-][^\s\"',}\\]*"
)
# A bootstrap token (kubeadm's abcdef.0123456789abcdef), a JSON Web Token.
_BOOTSTRAP_TOKEN = re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
# Anything else long and random: 32+ characters of a base64/hex alphabet with letters and digits mixed.
_RANDOM = re.compile(r"[A-Za-z0-9+/_=-]{32,}")


def _random_run(match: re.Match[str]) -> str:
    run = match.group()
    if re.search(r"[0-9]", run) and re.search(r"[A-Za-z]", run):
        return "[long random string]"
    return run


def redacted(text: str) -> str:
    """`text` with every credential-shaped part replaced by the name of its shape."""
    text = _PEM.sub("[key or certificate block]", text)
    text = _USERINFO.sub(r"\1[credentials]@", text)
    text = _BARE_USERINFO.sub("[credentials]@", text)
    text = _AUTH_SCHEME.sub(r"\1 [secret]", text)
    text = _NAMED.sub(r"\1\2[secret]", text)
    text = _FLAG.sub(r"\1[secret]", text)
    text = _JWT.sub("[token]", text)
    text = _BOOTSTRAP_TOKEN.sub("[token]", text)
    return _RANDOM.sub(_random_run, text)
