"""A controller's API client, paced as client-go paces it: a token bucket on the simulated clock.

Every request a client-go REST client sends first waits on its rate limiter (k8s.io/client-go rest/request.go
``tryThrottle``), by default ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)`` (rest/config.go
``RESTClientForConfigAndClient``; DefaultQPS 5, DefaultBurst 10 when the config leaves them 0), which is
golang.org/x/time/rate's ``Limiter.Wait``: tokens refill at ``qps`` up to ``burst``, each request takes one, and a
request that finds none reserves the next one and sleeps until it is due -- so waiting requests go out in the order
they asked, ``1/qps`` apart (rate.go ``reserveN``: the token count may go negative, the debt is the wait).

Where the bucket lives differs per program, and it matters:

- kueue-controller-manager (kubernetes-sigs/kueue@ff69552e cmd/kueue/main.go) sets ``kubeConfig.RateLimiter`` from
  the Configuration's ``clientConnection`` ("otherwise the controller-runtime's typedClient will use a different
  RateLimiter for each API type"): one bucket for every request of the manager (``shared=True``); a negative qps
  turns it off.
- A program that sets only ``QPS``/``Burst`` (Kueue's test/performance/scheduler/minimalkueue: 50 / 100) gets one
  bucket per API type, because controller-runtime builds one REST client per GroupVersionKind from a copy of the
  config (controller-runtime pkg/client/apiutil ``RESTClientForGVK``) (``shared=False``).
- A client-go clientset is one bucket for all its resources: ``kubernetes.NewForConfigAndClient`` makes one
  ``NewTokenBucketRateLimiter(QPS, Burst)`` when the config has no ``RateLimiter`` and ``QPS > 0`` and hands it to
  every group's client (kubernetes/kubernetes staging/src/k8s.io/client-go/kubernetes/clientset.go).
  kube-scheduler builds two clientsets from one config (cmd/kube-scheduler/app/options/options.go
  ``createClients``, kubernetes@008b3652): the scheduler's client and the event broadcaster's, so Events never take
  the binder's tokens. kube-controller-manager builds one clientset per controller
  (staging/src/k8s.io/controller-manager/pkg/clientbuilder/client_builder.go ``SimpleControllerClientBuilder.Client``
  copies the config, RateLimiter nil, and calls ``clientset.NewForConfig``): each controller has its own bucket
  (``ClientBuilder``).

The twin's controllers read their caches at once; only their writes wait here. ``reserve`` answers when a request
asked for now may go; the caller does the write then (``sim.Environment.at``), or at once when it is due now, so a
run whose clients never run out of tokens is unchanged by them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from kubetwin.sim.env import Environment
from kubetwin.sim.outputs import Contribution


class TokenBucket:
    """golang.org/x/time/rate.Limiter's reservations: ``reserve(now)`` takes a token and returns when it is due."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, burst
        self._tokens = float(burst)  # may go negative: the debt of the requests already waiting
        self._last = 0.0

    def reserve(self, now: float) -> float:
        """Take one token at ``now``; the time the request may go (``now`` when a token was there)."""
        if now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0.0:
            return now
        return self._last + (-self._tokens) / self.qps


class ApiClient:
    """One program's client: its buckets (one shared, or one per resource), and the requests it made per resource
    and verb, with the seconds they waited for a token."""

    def __init__(self, name: str, qps: float, burst: int, *, shared: bool = True) -> None:
        self.name, self.qps, self.burst, self.shared = name, qps, burst, shared
        self._buckets: dict[str, TokenBucket] = {}
        self.requests: Counter[str] = Counter()  # "verb resource" -> count
        self.waited = 0.0  # seconds, summed over requests
        self.max_wait = 0.0

    @property
    def limited(self) -> bool:
        """False when client-side rate limiting is off (a negative qps, as cmd/kueue reads it)."""
        return self.qps > 0

    def reserve(self, resource: str, verb: str, now: float) -> float:
        """A ``verb`` request on ``resource`` (a plural, with ``/status`` for the subresource) asked at ``now``:
        when it goes."""
        self.requests[f"{verb} {resource}"] += 1
        if not self.limited:
            return now
        key = "" if self.shared else resource.split("/", 1)[0]
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self.qps, self.burst)
        due = bucket.reserve(now)
        wait = due - now
        if wait > 0:
            self.waited += wait
            self.max_wait = max(self.max_wait, wait)
        return due

    def send(self, env: Environment, resource: str, verb: str, do: Callable[[], object]) -> float:
        """Make a request through this client: ``do`` (the write) now when a token is there, else when it is due
        (``env.at``); returns that time, so a caller that waits for the request knows when it is through."""
        due = self.reserve(resource, verb, env.now)
        if due <= env.now:
            do()
        else:
            env.at(due, lambda: _call(do))
        return due

    def summary(self) -> dict[str, object]:
        """summary.json's view: the limits, requests per verb and resource, and the time they waited."""
        return {"qps": self.qps, "burst": self.burst, "rateLimiter": "shared" if self.shared else "per resource",
                "requests": dict(sorted(self.requests.items())), "requests_total": sum(self.requests.values()),
                "waited_s": round(self.waited, 3), "max_wait_s": round(self.max_wait, 3)}


def _call(do: Callable[[], object]) -> None:
    do()


class ClientBuilder:
    """kube-controller-manager's ControllerClientBuilder: one client, so one bucket, per controller name, each with
    the manager's ``--kube-api-qps`` / ``--kube-api-burst``."""

    def __init__(self, program: str, qps: float, burst: int) -> None:
        self.program, self.qps, self.burst = program, qps, burst
        self._clients: dict[str, ApiClient] = {}

    def client(self, name: str) -> ApiClient:
        """The controller ``name``'s client (``ClientOrDie(name)``), made on first use."""
        found = self._clients.get(name)
        if found is None:
            found = self._clients[name] = ApiClient(name, self.qps, self.burst)
        return found

    def summary(self) -> dict[str, object]:
        """Each controller's client that made a request, by name."""
        return {name: c.summary() for name, c in sorted(self._clients.items()) if c.requests}

    def contribute(self, until: float) -> Contribution:
        """summary.json's ``<program>_api_clients`` section (kube_controller_manager_api_clients)."""
        clients = self.summary()
        key = self.program.replace("-", "_") + "_api_clients"
        return Contribution(summary={key: clients} if clients else {})
