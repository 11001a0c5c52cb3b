"""The policy pack as the CLI runs it: `python policy/__main__.py` serves the analyzer over gRPC; we call it
with the requests the engine would send (no Pulumi CLI here), for the on-prem stack and a violating one."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from components.plan.policies import Resource, pack_policies, synthetic

from .conftest import PROJECT
from .test_policy import init_step, onprem


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Any]:
    server = subprocess.Popen(
        [sys.executable, "__main__.py"],
        cwd=PROJECT / "policy",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().strip())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=20)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        server.kill()
        server.wait(timeout=10)


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    json_format.ParseDict(value, struct)
    return struct


def _stack_resource(r: Resource) -> analyzer_pb2.AnalyzerResource:
    options = analyzer_pb2.AnalyzerResourceOptions(protect=r.protect, parent=r.parent or "")
    return analyzer_pb2.AnalyzerResource(
        type=r.type, properties=_struct(r.wire), urn=r.urn, name=r.name, options=options, parent=r.parent or ""
    )


def _messages(response: Any) -> list[tuple[str, str]]:
    return [(d.policyName, d.message) for d in response.diagnostics]


def test_the_pack_describes_its_policies(analyzer) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "mlcluster"
    assert sorted(p.name for p in info.policies) == sorted(pack_policies())
    kueue = next(p for p in info.policies if p.name == "kueue-quotas-within-inventory")
    assert "gpuInventory" in kueue.configSchema.properties


def test_analyze_each_resource(analyzer) -> None:
    for resource in onprem():
        response = analyzer.Analyze(
            analyzer_pb2.AnalyzeRequest(
                type=resource.type,
                properties=_struct(resource.wire),
                urn=resource.urn,
                name=resource.name,
                options=analyzer_pb2.AnalyzerResourceOptions(protect=resource.protect),
            )
        )
        assert _messages(response) == [], resource.name
    leaky = synthetic("command:remote:Command", "w-1-os", {"create": "true", "connection": {"host": "198.18.0.5"}})
    response = analyzer.Analyze(
        analyzer_pb2.AnalyzeRequest(type=leaky.type, properties=_struct(leaky.wire), urn=leaky.urn, name=leaky.name)
    )
    assert [p for p, _ in _messages(response)] == ["ssh-host-keys-pinned"]


def test_analyze_the_stack(analyzer) -> None:
    clean = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[_stack_resource(r) for r in onprem()]))
    assert _messages(clean) == []
    unprotected = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[_stack_resource(init_step(False))]))
    assert [p for p, _ in _messages(unprotected)] == ["first-control-plane-protected"]
    assert [d.enforcementLevel for d in unprotected.diagnostics] == [analyzer_pb2.MANDATORY]
