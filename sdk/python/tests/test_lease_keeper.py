"""The lease keeper's renewals, driven on a clock of the test's own: no
server and no waiting, so nothing depends on timing."""

from __future__ import annotations

import threading

import httpx
import pytest

from sbx import _lease
from sbx._wire import endpoint


class _Clock:
    """Stands in for the time module: moves only when the test moves it."""

    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


def _drive(monkeypatch: pytest.MonkeyPatch, script: list[str], lease_s: float = 3.0) -> tuple[list[float], list[float]]:
    """Keep one sandbox's lease while the server answers its renewals as
    ``script`` says, one outcome a renewal: "hang" (until the renewal's
    timeout), "fail" (503 at once) or "ok"; after the script, the sandbox
    is gone (404). Returns when the renewals were sent and when those that
    succeeded were, in seconds from the create."""
    clock = _Clock()
    monkeypatch.setattr(_lease, "time", clock)
    start = clock.t
    sent: list[float] = []
    oks: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response:
        n = len(sent)
        sent.append(clock.t - start)
        if n >= len(script):
            return httpx.Response(404)
        if script[n] == "hang":
            clock.t += request.extensions["timeout"]["read"]
            raise httpx.ReadTimeout("no answer", request=request)
        if script[n] == "fail":
            return httpx.Response(503)
        oks.append(clock.t - start)
        return httpx.Response(200, json={})

    keeper = _lease.LeaseKeeper(endpoint("http://sbx"), None, True)
    keeper._thread = threading.current_thread()  # no thread of its own: the test drives it
    keeper.keep("sb", lease_s)
    with httpx.Client(transport=httpx.MockTransport(answer), base_url="http://sbx") as http:
        for _ in range(100):
            if not keeper.kept():
                return sent, oks
            with keeper._cond:
                due = keeper._take_due(clock.t)
            if not due:
                clock.t = min(keeper._due.values())
                continue
            for sandbox_id, timeout_s in due:
                keeper._renew(http, sandbox_id, timeout_s)
    raise AssertionError(f"still renewing after 100 rounds: sent at {sent}")


@pytest.mark.parametrize(
    "script",
    [
        ["hang", "hang", "ok", "ok"],
        ["fail", "fail", "fail", "ok", "ok"],
        ["hang", "fail", "hang", "ok", "ok"],
        ["ok", "ok", "ok"],
    ],
)
def test_failed_renewals_are_tried_again_within_the_lease(monkeypatch: pytest.MonkeyPatch, script: list[str]) -> None:
    lease_s = 3.0
    sent, oks = _drive(monkeypatch, script, lease_s)
    assert len(sent) == len(script) + 1, f"renewals sent at {sent}"
    last = 0.0
    for ok in oks:
        assert ok - last < lease_s, f"renewed at {ok}, {ok - last} s after the last renewal: the lease had run out (sent at {sent})"
        last = ok
    assert len(oks) == script.count("ok")
