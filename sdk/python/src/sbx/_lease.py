"""Owner leases a client keeps: the sandboxes a client creates with a lease
are renewed by one daemon thread every third of their lease until they are
removed or the client is closed, as the Go client does. When the program
ends or crashes the renewals stop, and the server removes the sandboxes a
lease later, so a crashed agent leaves nothing running.

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

#: Seconds a renewal may take before it is tried again at the next tick.
RENEW_TIMEOUT_S = 10.0


class LeaseKeeper:
    """Renews the leases of the sandboxes a client created."""

    def __init__(self, ep: Endpoint, token: Optional[str], verify: Union[bool, str]) -> None:
        self._ep, self._token, self._verify = ep, token, verify
        self._cond = threading.Condition()
        self._leases: dict[str, float] = {}  # sandbox id -> lease in seconds
        self._due: dict[str, float] = {}  # sandbox id -> monotonic time of its next renewal
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    def keep(self, sandbox_id: str, lease_s: float) -> None:
        """Renew the lease of ``sandbox_id`` (``lease_s`` seconds long)
        every third of it from now on."""
        with self._cond:
            if self._closed:
                return
            self._leases[sandbox_id] = lease_s
            self._due[sandbox_id] = time.monotonic() + lease_s / 3
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sbx-lease-keeper", daemon=True)
                self._thread.start()
            self._cond.notify()

    def forget(self, sandbox_id: str) -> None:
        """Stop renewing ``sandbox_id`` (it was removed)."""
        with self._cond:
            self._leases.pop(sandbox_id, None)
            self._due.pop(sandbox_id, None)

    def kept(self) -> list[str]:
        """The ids whose leases are being renewed."""
        with self._cond:
            return sorted(self._leases)

    def close(self) -> None:
        """Stop renewing: the sandboxes go a lease after their last
        renewal unless someone else renews them."""
        with self._cond:
            self._closed = True
            self._leases.clear()
            self._due.clear()
            self._cond.notify()

    def _next(self) -> Optional[list[tuple[str, float]]]:
        """Wait until renewals are due and return them; None once closed."""
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                due = [(i, self._leases[i]) for i, t in self._due.items() if t <= now]
                if due:
                    for i, lease_s in due:
                        self._due[i] = now + lease_s / 3
                    return due
                wait = min(self._due.values(), default=now + 3600) - now
                self._cond.wait(timeout=max(wait, 0.01))
            return None

    def _run(self) -> None:
        transport = httpx.HTTPTransport(uds=self._ep.uds, verify=self._verify, retries=0)
        opts = client_options(self._ep, self._token, RENEW_TIMEOUT_S)
        with httpx.Client(transport=transport, **opts) as http:  # type: ignore[arg-type]
            while (due := self._next()) is not None:
                for sandbox_id, lease_s in due:
                    try:
                        resp = http.post(sandbox_path(sandbox_id, "/renew"), timeout=min(RENEW_TIMEOUT_S, lease_s / 3))
                    except httpx.HTTPError:
                        continue  # tried again at the next tick
                    if resp.status_code == 404:
                        self.forget(sandbox_id)  # removed
