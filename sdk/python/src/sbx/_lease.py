"""Owner leases a client keeps: the sandboxes a client creates with a lease
are renewed by one daemon thread every third of their lease until they are
removed or the client is closed, as the Go client does. A renewal that fails
is tried again after a short pause (RETRY_PAUSE_S, doubling up to a third of
the lease, at most half of what is left of it), each try allowed half of
what is left of the lease (at least a twelfth of it, at most
RENEW_TIMEOUT_S), until one succeeds or less than RETRY_PAUSE_S of the lease
is left. When the program ends or crashes the renewals stop, and the server
removes the sandboxes a lease later, so a crashed agent leaves nothing
running.

The thread has a synchronous HTTP client of its own, so the sync and the
async client share this one implementation."""

from __future__ import annotations

import threading
import time
from typing import Optional, Union

import httpx

from ._transport import client_options
from ._wire import Endpoint, sandbox_path

#: The owner lease of a sandbox created without ``lease``, unless the
#: client is given another (``Client(lease=...)``; None: no lease).
DEFAULT_LEASE = "5m"

#: Seconds a renewal may take at most before it is tried again.
RENEW_TIMEOUT_S = 10.0

#: Seconds before a failed renewal is first tried again.
RETRY_PAUSE_S = 0.1


class LeaseKeeper:
    """Renews the leases of the sandboxes a client created."""

    def __init__(self, ep: Endpoint, token: Optional[str], verify: Union[bool, str]) -> None:
        self._ep, self._token, self._verify = ep, token, verify
        self._cond = threading.Condition()
        self._leases: dict[str, float] = {}  # sandbox id -> lease in seconds
        self._due: dict[str, float] = {}  # sandbox id -> monotonic time of its next renewal
        self._expires: dict[str, float] = {}  # sandbox id -> monotonic time its lease runs out
        self._pause: dict[str, float] = {}  # sandbox id -> pause before its next retry
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    def keep(self, sandbox_id: str, lease_s: float) -> None:
        """Renew the lease of ``sandbox_id`` (``lease_s`` seconds long)
        every third of it from now on."""
        with self._cond:
            if self._closed:
                return
            now = time.monotonic()
            self._leases[sandbox_id] = lease_s
            self._due[sandbox_id] = now + lease_s / 3
            self._expires[sandbox_id] = now + lease_s  # the lease runs from the create's end
            self._pause[sandbox_id] = RETRY_PAUSE_S
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sbx-lease-keeper", daemon=True)
                self._thread.start()
            self._cond.notify()

    def forget(self, sandbox_id: str) -> None:
        """Stop renewing ``sandbox_id`` (it was removed)."""
        with self._cond:
            for d in (self._leases, self._due, self._expires, self._pause):
                d.pop(sandbox_id, None)

    def kept(self) -> list[str]:
        """The ids whose leases are being renewed."""
        with self._cond:
            return sorted(self._leases)

    def close(self) -> None:
        """Stop renewing: the sandboxes go a lease after their last
        renewal unless someone else renews them."""
        with self._cond:
            self._closed = True
            for d in (self._leases, self._due, self._expires, self._pause):
                d.clear()
            self._cond.notify()

    def _next(self) -> Optional[list[tuple[str, float]]]:
        """Wait until renewals are due and return them (id, timeout of the
        renewal); None once closed."""
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                due = self._take_due(now)
                if due:
                    return due
                wait = min(self._due.values(), default=now + 3600) - now
                self._cond.wait(timeout=max(wait, 0.01))
            return None

    def _take_due(self, now: float) -> list[tuple[str, float]]:
        """The renewals due at ``now``, each with the time it may take:
        half of what is left of the lease, at least a twelfth of it, at
        most RENEW_TIMEOUT_S. Their next renewal is a third of the lease
        later unless they fail (_failed). Call with the lock held."""
        due = []
        for i, t in self._due.items():
            if t <= now:
                lease_s = self._leases[i]
                self._due[i] = now + lease_s / 3
                left = self._expires[i] - now
                due.append((i, min(RENEW_TIMEOUT_S, max(left / 2, lease_s / 12))))
        return due

    def _renewed(self, sandbox_id: str, sent: float) -> None:
        """The renewal of ``sandbox_id`` sent at ``sent`` succeeded."""
        with self._cond:
            if sandbox_id in self._leases:
                self._expires[sandbox_id] = sent + self._leases[sandbox_id]
                self._pause[sandbox_id] = RETRY_PAUSE_S

    def _failed(self, sandbox_id: str) -> None:
        """The renewal of ``sandbox_id`` failed: try it again after a pause
        while enough of its lease is left, else at the next third."""
        with self._cond:
            if sandbox_id not in self._leases:
                return
            now = time.monotonic()
            left = self._expires[sandbox_id] - now
            if left < RETRY_PAUSE_S:
                return  # run out: the next renewal finds it gone, or renews it
            pause = self._pause[sandbox_id]
            self._due[sandbox_id] = now + min(pause, left / 2)
            self._pause[sandbox_id] = min(2 * pause, self._leases[sandbox_id] / 3)

    def _renew(self, http: httpx.Client, sandbox_id: str, timeout_s: float) -> None:
        """Send one renewal of ``sandbox_id`` and note how it went."""
        sent = time.monotonic()
        try:
            resp = http.post(sandbox_path(sandbox_id, "/renew"), timeout=timeout_s)
        except httpx.HTTPError:
            self._failed(sandbox_id)
            return
        if resp.status_code == 404:
            self.forget(sandbox_id)  # removed
        elif resp.is_success:
            self._renewed(sandbox_id, sent)
        else:
            self._failed(sandbox_id)

    def _run(self) -> None:
        transport = httpx.HTTPTransport(uds=self._ep.uds, verify=self._verify, retries=0)
        opts = client_options(self._ep, self._token, RENEW_TIMEOUT_S)
        with httpx.Client(transport=transport, **opts) as http:  # type: ignore[arg-type]
            while (due := self._next()) is not None:
                for sandbox_id, timeout_s in due:
                    self._renew(http, sandbox_id, timeout_s)
