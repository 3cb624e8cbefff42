"""A bounded schemathesis pass over the server's own /openapi.json: generated bodies (valid and
not) for every route never get a 5xx, and the KV pool is whole afterwards."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies

schemathesis = pytest.importorskip("schemathesis")

EXAMPLES_PER_ROUTE = 60   # × the routes of the document: a few hundred requests, well under a minute


def test_generated_requests_never_get_a_server_error(server):
    from schemathesis.checks import not_a_server_error
    from schemathesis.generation import GenerationMode

    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    calls = {"n": 0}
    routes = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        routes += 1
        strategy = strategies.one_of(operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
                                     operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))

        @settings(max_examples=EXAMPLES_PER_ROUTE, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=strategy)
        def check(case):
            if case.body is not None and isinstance(case.body, dict):
                # keep generated requests short: a huge max_tokens is refused, a small one runs
                for key in ("max_tokens", "max_completion_tokens"):
                    if isinstance(case.body.get(key), int) and 0 < case.body[key] > 8:
                        case.body[key] = 8
            calls["n"] += 1
            case.call_and_validate(checks=[not_a_server_error], timeout=60)

        check()
    print(f"schemathesis: {calls['n']} requests over {routes} routes")
    assert routes >= 10 and calls["n"] >= routes
