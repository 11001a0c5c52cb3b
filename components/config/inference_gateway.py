"""Inference routing settings: the Gateway API implementation (Envoy Gateway) in front of KServe, and each
endpoint's versions (a weighted canary) and header routes (an OpenAI-style model header picks a version)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import checks, formats
from .redact import redacted
from .schema import Problems, join_path, setting, show

HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~]{1,256}")
"""An RFC 7230 token (a header field name), as Gateway API's HTTPHeaderName pattern takes it, at most 256."""
HEADER_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?")
"""RFC 7230 field-value, visible ASCII only: no CR/LF (header injection) and no leading or trailing blanks, which
proxies strip before matching, so such a value would never match."""
HEADER_VALUE_MAX = 4096
"""Gateway API's HTTPHeaderMatch value maxLength."""
ROUTE_RULES_MAX = 16
"""Gateway API allows 16 rules per HTTPRoute: the header routes plus the weighted default."""
BACKENDS_MAX = 16
"""Gateway API allows 16 backendRefs per rule: one per version."""
PREDICTOR_SUFFIX = "-predictor"
"""KServe (Standard mode) names an InferenceService's Deployment and Service <name>-predictor."""


CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"})
"""Headers that carry a credential: a route matching one holds that credential in the HTTPRoute, in plaintext for
anyone who may read routes, and in every access log of the proxy."""


def header_name(value: str) -> str | None:
    if not HEADER_NAME.fullmatch(value):
        return "is not an HTTP header name (an RFC 7230 token such as x-model, at most 256 characters)"
    if value.lower() in CREDENTIAL_HEADERS:
        return (
            f"is {value}, which carries a credential: matching its value would put the credential in the route in"
            " plaintext; route on a header such as x-model"
        )
    return None


def header_value(value: str) -> str | None:
    if len(value) > HEADER_VALUE_MAX:
        return f"is longer than {HEADER_VALUE_MAX} characters (Gateway API's limit)"
    if not HEADER_VALUE.fullmatch(value):
        return "is not an HTTP header value: printable ASCII, no line breaks, no leading or trailing blanks"
    if redacted(value) != value:
        return "looks like a credential (a token or key): it would sit in the route in plaintext"
    return None


@dataclass(frozen=True)
class EndpointVersionSpec:
    name: str = setting(
        doc="Version name: the InferenceService is <endpoint>-<name> (e.g. chat-v1).", check=checks.k8s_name
    )
    weight: int = setting(
        doc="Share of the endpoint's traffic in percent (all versions add up to 100; 0: header routes only).",
        check=checks.between(0, 100),
    )
    storage_uri: str | None = setting(
        None, doc="This version's model (default: the endpoint's storageUri).", check=formats.storage_uri
    )
    runtime: str | None = setting(
        None, doc="This version's ServingRuntime (default: the endpoint's runtime).", check=checks.k8s_name
    )


@dataclass(frozen=True)
class HeaderRouteSpec:
    value: str = setting(doc="Header value that selects the version (exact match).", check=header_value)
    version: str = setting(doc="The version (versions[].name) requests with this value go to.")
    header: str = setting("x-model", doc="HTTP header to match (case-insensitive).", check=header_name)


@dataclass(frozen=True)
class GatewaySpec:
    enabled: bool | None = setting(
        None,
        doc="Serve endpoints through Gateway API (Envoy Gateway, a GatewayClass and a Gateway KServe attaches"
        " its HTTPRoutes to). Default: on in deploymentMode Standard; Knative mode routes through Kourier.",
    )
    version: str = setting(
        "v1.9.0",
        doc="Envoy Gateway chart (gateway-helm) version; it installs the Gateway API CRDs it pins (v1.6.1).",
        check=checks.pinned_chart_version,
    )
    namespace: str = setting(
        "envoy-gateway-system", doc="Namespace of the Envoy Gateway release.", check=checks.k8s_name
    )
    domain: str = setting(
        "example.com",
        doc="KServe's ingress domain: an endpoint answers at <name>-<namespace>.<domain> on the Gateway.",
        check=checks.gateway_hostname,
    )


def validate_routes(
    path: str,
    versions: Sequence[EndpointVersionSpec],
    header_routes: Sequence[HeaderRouteSpec],
    endpoint_name: str,
    problems: Problems,
) -> None:
    """One endpoint's versions and header routes; every problem reported, each at its key path."""
    names: dict[str, int] = {}
    for i, version in enumerate(versions):
        at = join_path(join_path(path, "versions"), i)
        if version.name in names:
            problems.error(
                join_path(at, "name"),
                f"{show(version.name)} is already versions[{names[version.name]}]: each version names its own"
                " InferenceService",
            )
        names.setdefault(version.name, i)
        service = f"{endpoint_name}-{version.name}{PREDICTOR_SUFFIX}"
        if len(service) > 63:
            # KServe's Service for the version must be a DNS label.
            problems.error(
                join_path(at, "name"),
                f"makes KServe's Service name {service} ({len(service)} characters) longer than 63: shorten the"
                " endpoint or version name",
            )
    if versions:
        total = sum(v.weight for v in versions)
        if total != 100:
            problems.error(
                join_path(path, "versions"),
                f"weights add up to {total}, not 100: " + ", ".join(f"{v.name} {v.weight}" for v in versions),
            )
        if len(versions) > BACKENDS_MAX:
            problems.error(join_path(path, "versions"), f"({len(versions)}) Gateway API takes at most {BACKENDS_MAX}")
    elif header_routes:
        problems.error(
            join_path(path, "headerRoutes"),
            "route to versions: declare versions (each an InferenceService) for the header values to select",
        )
        return
    if len(header_routes) > ROUTE_RULES_MAX - 1:
        problems.error(
            join_path(path, "headerRoutes"),
            f"({len(header_routes)}) at most {ROUTE_RULES_MAX - 1}: an HTTPRoute takes {ROUTE_RULES_MAX} rules,"
            " one of them the weighted default",
        )
    seen: dict[tuple[str, str], int] = {}
    for i, route in enumerate(header_routes):
        at = join_path(join_path(path, "headerRoutes"), i)
        if route.version not in names:
            problems.error(
                join_path(at, "version"),
                f"{show(route.version)} is not one of this endpoint's versions ({', '.join(names) or 'none'})",
            )
        # Header names match case-insensitively: x-model and X-Model are the same match.
        key = (route.header.lower(), route.value)
        if key in seen:
            problems.error(
                join_path(at, "value"),
                f"{route.header}: {show(route.value)} is already matched by headerRoutes[{seen[key]}]: the"
                " second route would never be taken",
            )
        seen.setdefault(key, i)
