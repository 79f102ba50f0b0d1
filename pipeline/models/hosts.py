"""Several Ollama hosts behind the LLM seam (setting `ollama_hosts`; one `OLLAMA_HOST` by default).

A call goes to the host with the most free slots — `ollama_slots_per_host` minus this process's calls in
flight there — among the hosts that serve the model at its pinned digest; ties go to the host chosen
least recently, so equal hosts take turns. The pin is the digest reported by the first host in the list
that answers and has the model. A host without the model, or with another digest, is not used for it and
says why (Settings & health, `doctor`).

A host that fails (not reachable, timed out, HTTP 5xx or a dropped connection) is backed off for
`ollama_host_backoff_s`, doubled with each failure in a row up to BACKOFF_CAP_S, and the call fails over
to the next host; with no other host left, the call retries on its host as a single host does. When
every host is backed off, each call still tries the one whose backoff ends first, so a host that comes
back is noticed, and a single host (the default) behaves exactly as before: it is never skipped.

The state (calls in flight, latencies, backoffs) is this process's: module-level, shared by every LLM.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from pipeline.config import Settings
from pipeline.errors import ModelMissing, OllamaTimeout, OllamaUnreachable, WorkbenchError
from pipeline.models.failures import HostsUnavailable, OllamaServerError, Transient
from pipeline.models.ollama_models import cached_models, forget_host_models, normalise_model, pulled_models
from pipeline.models.slots import CPU_SLOTS, Slots, host_slots

BACKOFF_CAP_S = 300.0
LATENCY_WINDOW = 200  # the recent requests a host's p50 latency is taken over
HOST_FAILURES = (OllamaUnreachable, OllamaTimeout, OllamaServerError, Transient)
# The time backoffs are counted on (read at each use, so a test can put its own clock here and step it).
clock = time.monotonic

T = TypeVar("T")


@dataclass
class HostState:
    url: str
    in_flight: int = 0
    requests: int = 0  # requests answered (model calls and model listings)
    failures: int = 0  # failures in total
    failures_in_row: int = 0
    down_until: float = 0.0  # on `clock`; the host is skipped until then
    down_until_wall: float = 0.0  # the same moment as time.time(), to show
    last_error: str = ""
    last_chosen: int = 0
    latencies: deque = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    unusable: dict[str, str] = field(default_factory=dict)  # model -> why this host is not used for it

    def backed_off(self, now: float | None = None) -> bool:
        return self.down_until > (clock() if now is None else now)


_states: dict[str, HostState] = {}
_lock = threading.Lock()
_ticket = itertools.count(1)


def host_state(url: str) -> HostState:
    with _lock:
        return _states.setdefault(url, HostState(url))


def forget_hosts() -> None:
    """Drop every host's state (tests start from a clean process)."""
    with _lock:
        _states.clear()


def utc(wall: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(wall))


def why(exc: BaseException) -> str:
    return exc.message if isinstance(exc, WorkbenchError) else getattr(exc, "detail", str(exc))


def short_why(exc: BaseException) -> str:
    """why() without repeating the host's address, for a list of hosts."""
    return "not reachable" if type(exc) is OllamaUnreachable else why(exc)


def _succeeded(host: HostState, seconds: float) -> None:
    with _lock:
        host.requests += 1
        host.latencies.append(seconds)
        host.failures_in_row, host.down_until, host.down_until_wall = 0, 0.0, 0.0


def _failed(host: HostState, exc: BaseException, base_s: float) -> None:
    """Back the host off; failures of calls already in flight when it went down do not lengthen it."""
    now = clock()
    with _lock:
        host.failures += 1
        host.last_error = short_why(exc)
        if host.down_until > now:
            return
        host.failures_in_row += 1
        wait = min(BACKOFF_CAP_S, base_s * 2 ** (host.failures_in_row - 1))
        host.down_until, host.down_until_wall = now + wait, time.time() + wait


@dataclass
class Lease:
    """A slot taken on a host for one request; release() gives it back and records how the request went."""

    host: HostState | None  # None: the call does not go to an Ollama host (the OpenAI-compatible server)
    settings: Settings  # the settings with ollama_host = this host
    started: float = field(default_factory=time.monotonic)
    released: bool = False

    def release(self, error: BaseException | None = None) -> None:
        if self.released or self.host is None:
            return
        self.released = True
        with _lock:
            self.host.in_flight -= 1
        if error is None:
            _succeeded(self.host, time.monotonic() - self.started)
        elif isinstance(error, HOST_FAILURES):
            _failed(self.host, error, self.settings.ollama_host_backoff_s)


class HostPool:
    """The configured Ollama hosts, seen through one Settings."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.hosts = [host_state(url) for url in settings.model_hosts()]
        self._settings_by_host: dict[str, Settings] = {}

    @property
    def single(self) -> bool:
        return len(self.hosts) == 1

    def settings_for(self, host: HostState) -> Settings:
        """The settings with ollama_host pointing at this host (every client and error message follows it)."""
        if host.url == self.settings.ollama_host:
            return self.settings
        if host.url not in self._settings_by_host:
            self._settings_by_host[host.url] = dataclasses.replace(self.settings, ollama_host=host.url)
        return self._settings_by_host[host.url]

    # -- listings and the pin -------------------------------------------------------------------
    def listing(self, host: HostState, fresh: bool = False) -> dict[str, str]:
        """The host's pulled models (name -> digest), from a minute-old cache unless fresh; a real request
        counts towards the host's health and latency."""
        settings = self.settings_for(host)
        cached = None if fresh else cached_models(settings)
        if cached is not None:
            return cached
        started = time.monotonic()
        try:
            models = pulled_models(settings, fresh=True)
        except HOST_FAILURES as exc:
            _failed(host, exc, self.settings.ollama_host_backoff_s)
            raise
        _succeeded(host, time.monotonic() - started)
        return models

    def _listable(self) -> list[HostState]:
        """Hosts not backed off, in list order; when all are, the one whose backoff ends first."""
        now = clock()
        up = [h for h in self.hosts if not h.backed_off(now)]
        return up or [min(self.hosts, key=lambda h: h.down_until)]

    def pinned_digest(self, model: str) -> str:
        """The digest of `model` on the first host in the list that answers and has it."""
        name = normalise_model(model)
        reasons: list[tuple[str, str]] = []
        listed: list[HostState] = []
        for host in self._listable():
            try:
                models = self.listing(host)
            except HOST_FAILURES as exc:
                if self.single:
                    raise
                reasons.append((host.url, short_why(exc)))
                continue
            if name in models:
                return models[name]
            listed.append(host)
        for host in listed:  # pulled since the cached listing was read?
            models = self.listing(host, fresh=True)
            if name in models:
                return models[name]
        if listed or self.single:
            raise ModelMissing(model)
        raise HostsUnavailable(reasons + self._skipped(reasons), model)

    def serves(self, host: HostState, model: str, digest: str | None) -> bool:
        """Whether the host has `model` at `digest` (by its cached listing); if not, the reason is kept."""
        name = normalise_model(model)
        try:
            have = self.listing(host).get(name)
        except HOST_FAILURES:
            return False
        if have is None:
            reason = "not pulled"
        elif digest and have != digest:
            reason = f"digest {have[:12]} differs from the pinned {digest[:12]}"
        else:
            reason = ""
        with _lock:
            if reason:
                host.unusable[name] = reason
            else:
                host.unusable.pop(name, None)
        return not reason

    # -- routing ----------------------------------------------------------------------------------
    def _candidates(self, model: str, digest: str | None, tried: list[HostState]) -> list[HostState]:
        if self.single:
            return [] if tried else list(self.hosts)
        now = clock()
        up = [h for h in self.hosts if h not in tried and not h.backed_off(now)]
        usable = [h for h in up if self.serves(h, model, digest)]
        if usable or tried:
            return usable
        waiting = sorted((h for h in self.hosts if h.backed_off(now)), key=lambda h: h.down_until)
        return [h for h in waiting[:1] if self.serves(h, model, digest)]  # a probe: the first to come back

    def lease(self, model: str, digest: str | None, tried: list[HostState]) -> Lease | None:
        """A slot on the candidate with the most free slots (ties: chosen least recently), or None."""
        candidates = self._candidates(model, digest, tried)
        if not candidates:
            return None
        slots = {h.url: self.settings.slots_set_for(h.url) for h in candidates}  # 0 (read from the host): all alike
        with _lock:
            host = max(candidates, key=lambda h: (slots[h.url] - h.in_flight, -h.last_chosen))
            host.in_flight += 1
            host.last_chosen = next(_ticket)
        return Lease(host, self.settings_for(host))

    def call(self, model: str, digest: str | None, request: Callable[[Lease, bool], T]) -> tuple[T, Lease]:
        """request(lease, last) on the chosen host. On a host failure the host is backed off and the call
        fails over to the next; `last` says no other host is left (the request may retry on this one then).
        Returns the result with its lease still held: the caller releases it (a stream, once drained)."""
        tried: list[HostState] = []
        reasons: list[tuple[str, str]] = []
        while (lease := self.lease(model, digest, tried)) is not None:
            tried.append(lease.host)
            last = self.single or not self._candidates(model, digest, tried)
            try:
                return request(lease, last), lease
            except ModelMissing as exc:
                lease.release(exc)
                if self.single:
                    raise
                forget_host_models(lease.host.url)  # re-read its listing before it is chosen for this model again
                reasons.append((lease.host.url, f"{model} not pulled"))
            except HOST_FAILURES as exc:
                lease.release(exc)
                if self.single:
                    raise
                reasons.append((lease.host.url, short_why(exc)))
            except BaseException as exc:
                lease.release(exc)
                raise
        if reasons and all(r == f"{model} not pulled" for _, r in reasons) and len(reasons) == len(self.hosts):
            raise ModelMissing(model)
        raise HostsUnavailable(reasons + self._skipped(reasons, model), model)

    def _skipped(self, reasons: list[tuple[str, str]], model: str | None = None) -> list[tuple[str, str]]:
        """Why each host not in `reasons` was not tried."""
        named = {url for url, _ in reasons}
        out = []
        for host in self.hosts:
            if host.url in named:
                continue
            if host.backed_off():
                out.append((host.url, f"backed off until {utc(host.down_until_wall)} after: {host.last_error}"))
            elif model and normalise_model(model) in host.unusable:
                out.append((host.url, f"{model} {host.unusable[normalise_model(model)]}"))
            else:
                out.append((host.url, "not tried"))
        return out


def unrouted(settings: Settings) -> Lease:
    """A lease that holds nothing: for calls to the OpenAI-compatible server."""
    return Lease(None, settings)


# -- status, for Settings & health and `doctor` ------------------------------------------------------
@dataclass
class HostStatus:
    host: str
    reachable: bool
    detail: str  # why it is not reachable, or how many models it has
    in_flight: int
    slots: int  # for the generator: the schedule of a question's calls follows it (models/slots.py)
    p50_ms: float | None
    requests: int
    failures: int
    backed_off_until: str  # "" when it is not backed off
    unusable: dict[str, str]  # model -> why it is not used for it
    listing: dict[str, str] | None = None  # its pulled models (name -> digest) when reachable
    error: BaseException | None = None  # why it could not be listed
    slots_why: str = ""  # where the slot count comes from

    def row(self) -> dict:
        return {
            "host": self.host,
            "state": "reachable" if self.reachable else "not reachable",
            "detail": self.detail,
            "in flight / slots": f"{self.in_flight} / {self.slots}",
            "slots: why": self.slots_why,
            "p50 latency (ms)": None if self.p50_ms is None else round(self.p50_ms, 1),
            "requests": self.requests,
            "failures": self.failures,
            "backed off until": self.backed_off_until,
            "models not used here": "; ".join(f"{m}: {w}" for m, w in sorted(self.unusable.items())),
        }


def host_statuses(settings: Settings, models: list[str]) -> list[HostStatus]:
    """Every configured host, listed afresh: reachable or not (and why), which of `models` it is not used
    for (not pulled, or another digest than the pin), calls in flight, p50 latency, backoff."""
    pool = HostPool(settings)

    def listed(host: HostState) -> dict[str, str] | BaseException:
        try:
            return pool.listing(host, fresh=True)
        except HOST_FAILURES as exc:
            return exc

    # at once: a host that times out does not hold up the others
    with ThreadPoolExecutor(max_workers=len(pool.hosts)) as workers:
        listings = dict(zip([h.url for h in pool.hosts], workers.map(listed, pool.hosts), strict=True))
    pins = pinned_digests(listings, models)
    return [_status(settings, host, listings[host.url], pins) for host in pool.hosts]


def pinned_digests(listings: dict[str, dict | BaseException], models: list[str]) -> dict[str, str]:
    """model -> its pin: the digest on the first listed host (in the settings' order) that has it."""
    pins: dict[str, str] = {}
    for listing in listings.values():
        if isinstance(listing, dict):
            for model in models:
                name = normalise_model(model)
                if name in listing:
                    pins.setdefault(name, listing[name])
    return pins


def _status(settings: Settings, host: HostState, listing, pins: dict[str, str]) -> HostStatus:
    reachable = isinstance(listing, dict)
    if reachable or settings.slots_set_for(host.url) > 0:  # a count that is set needs no answer from the host
        slots = host_slots(settings, host.url, settings.generator_model)
    else:
        slots = Slots(CPU_SLOTS, "not read: the host is not reachable")
    unusable = {}
    if reachable:
        for name, pin in pins.items():
            have = listing.get(name)
            if have is None:
                unusable[name] = "not pulled"
            elif have != pin:
                unusable[name] = f"digest {have[:12]} differs from the pinned {pin[:12]}"
        with _lock:
            host.unusable = dict(unusable)
    with _lock:
        latencies = list(host.latencies)
        backed = host.backed_off()
        until = utc(host.down_until_wall) if backed else ""
        return HostStatus(
            host=host.url,
            reachable=reachable,
            detail=f"{len(listing)} models pulled" if reachable else why(listing),
            in_flight=host.in_flight,
            slots=slots.count,
            slots_why=slots.why,
            p50_ms=statistics.median(latencies) * 1000 if latencies else None,
            requests=host.requests,
            failures=host.failures,
            backed_off_until=until,
            unusable=unusable,
            listing=listing if reachable else None,
            error=None if reachable else listing,
        )
