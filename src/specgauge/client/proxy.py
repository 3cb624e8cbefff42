"""``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY`` for the measured stream: what is done, what is refused.

Read from the environment with the standard library's own rules
(``urllib.request.getproxies_environment`` and ``proxy_bypass_environment``: lower-case names win,
``NO_PROXY`` lists hosts or domain suffixes, ``*`` bypasses everything). Supported: an ``http://``
proxy for ``http://`` URLs, the request sent to the proxy in absolute form (``POST
http://host:port/path HTTP/1.1``, RFC 9112 section 3.2.2), with ``Proxy-Authorization: Basic`` from
the proxy URL's user and password. Refused with one line (no tunnel is opened: there is no
``CONNECT``): an ``https://`` URL through a proxy, and a proxy whose own URL is not ``http://``.
"""

from __future__ import annotations

import base64
import urllib.parse
import urllib.request
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProxyRoute:
    """The proxy a URL goes through: where to connect, and the header it wants (if any)."""

    host: str
    port: int
    authorization: str | None = field(default=None, repr=False)   # "Basic ..." from the proxy URL


def proxy_refusal(url: str) -> str | None:
    """Why ``url`` cannot be reached through the proxy the environment names, or None (no proxy,
    bypassed, or one this client can use)."""
    try:
        route_for(url)
    except ValueError as exc:
        return str(exc)
    return None


def route_for(url: str) -> ProxyRoute | None:
    """The :class:`ProxyRoute` for ``url`` from the environment, None for a direct connection;
    ``ValueError`` (one line, naming the variable) for what this client does not do."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    variable = f"{parts.scheme.upper()}_PROXY"
    if parts.scheme == "https":
        raise ValueError(f"{url} would go through the proxy in {variable}, and specgauge does not tunnel "
                         f"https through a proxy (no CONNECT): add the host to NO_PROXY to connect directly")
    target = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if target.scheme != "http" or not target.hostname:
        raise ValueError(f"{variable} must be an http:// proxy URL (got scheme {target.scheme!r}); "
                         f"add the host to NO_PROXY to connect directly")
    authorization = None
    if target.username is not None:
        pair = f"{urllib.parse.unquote(target.username)}:{urllib.parse.unquote(target.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    return ProxyRoute(target.hostname, target.port or 80, authorization)
