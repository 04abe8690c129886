"""Run-time distributions the user gives per owner (`--runtime OWNER=DIST`, issue 36 item 3): what an imported pod
runs when the dump cannot say (a real cluster's pods carry no kubetwin.io/duration), drawn again for every seed so
`kubetwin simulate --runs N` gives a start-time band over the run times, not only over the twin's other randomness.

DIST is one of (durations as kubetwin writes them: 90s, 45m, 2h, 1h30m, or seconds):

    fixed:1h   (or plainly 1h)                 every run the same
    exp:mean=30m                               exponential
    lognormal:median=2h,sigma=0.5              lognormal: exp(N(ln median, sigma)); `mean=` instead of `median=`
                                               gives the arithmetic mean (median = mean / exp(sigma^2 / 2))
    uniform:min=10m,max=1h
    empirical:FILE                             the run times in FILE, one a line (durations or seconds; `#`
                                               comments), drawn with replacement: a trace of the owner's past runs

A distribution is of the whole run time. A pod already running at the snapshot, for `ran` seconds, draws from the
distribution given that it has run that long (the run time's distribution conditioned on exceeding `ran`: inverse
transform from F(ran) up; the exponential's is memoryless), so a job that has run long is not expected to end at
once nor to start over; one already past every value the distribution allows ends at t=0.

OWNER picks whose pods: `*` (every Job's pods and pods of no owner, as `--remaining-run-time '*=...'`),
KIND/NAME or NAMESPACE/KIND/NAME with KIND as kubectl writes it (job, pod, replicaset, deployment, statefulset,
jobset, leaderworkerset...): a pod's owners are its controller and that one's controllers (a JobSet's Job, a
LeaderWorkerSet's leader pod); NAME and NAMESPACE may be shell-style patterns (job/sweep-*, research/job/*). The first
rule that matches wins. The rules apply to the workloads `kubetwin simulate` is asked about too (`templates`).

Each draw is seeded by (seed, the object's uid), so a run's draws do not depend on the order objects are read in,
and the same seed draws the same run times again.
"""

from __future__ import annotations

import fnmatch
import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.k8s.units import UnitError, parse_duration

__all__ = ["POD_OWNER", "Rule", "RunTime", "parse_rules", "rng", "templates"]

KINDS = ("fixed", "exp", "lognormal", "uniform", "empirical")
EXAMPLES = "e.g. --runtime 'job/*=lognormal:median=20m,sigma=0.6', ml/job/eval=exp:mean=30m or '*=fixed:1h'"
_NORMAL = statistics.NormalDist()


@dataclass(frozen=True)
class RunTime:
    """One distribution of a run time, in seconds (the module docstring lists the forms)."""

    kind: str
    a: float = 0.0  # fixed: the value; exp: the mean; lognormal: ln(median); uniform: min
    b: float = 0.0  # lognormal: sigma; uniform: max
    values: tuple[float, ...] = ()  # empirical, sorted
    text: str = ""

    def draw(self, r: random.Random, ran: float = 0.0) -> float:
        """A whole run time for a pod that has run `ran` seconds: drawn given that it lasts at least that long."""
        if self.kind == "fixed":
            return max(self.a, ran)
        if self.kind == "exp":
            return ran + r.expovariate(1 / self.a) if self.a > 0 else ran
        if self.kind == "uniform":
            return ran if ran >= self.b else r.uniform(max(self.a, ran), self.b)
        if self.kind == "empirical":
            above = [v for v in self.values if v > ran]  # sorted: the tail past `ran`
            return r.choice(above) if above else ran
        # lognormal: inverse transform from F(ran) up
        if self.b == 0:
            return max(math.exp(self.a), ran)
        low = _NORMAL.cdf((math.log(ran) - self.a) / self.b) if ran > 0 else 0.0
        u = min(low + (1 - low) * r.random(), 1 - 1e-12)
        if u <= 0:
            u = 1e-12
        return max(ran, math.exp(self.a + self.b * _NORMAL.inv_cdf(u)))

    def mean(self) -> float:
        """The distribution's mean (what a naive estimate multiplies by)."""
        if self.kind in ("fixed", "exp"):
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "empirical":
            return statistics.fmean(self.values)
        return math.exp(self.a + self.b ** 2 / 2)


@dataclass(frozen=True)
class Rule:
    """OWNER=DIST: a pattern over owner keys (`*`, kind/name, namespace/kind/name) and its distribution."""

    owner: str
    dist: RunTime

    def matches(self, kind: str | None, keys: list[str]) -> bool:
        """kind: the pod's controller's kind (None: a bare pod); keys: its owner's keys, as convert writes them
        (namespace/kind/name, kind/name, and a ReplicaSet's Deployment's)."""
        if self.owner == "*":
            return kind in (None, "Job")
        return any(fnmatch.fnmatchcase(k, self.owner) for k in keys if k.count("/") == self.owner.count("/"))


# A workload kind -> the kind of its pods' controller (what `*` looks at: a JobSet's pods are its Jobs')
POD_OWNER: dict[str, str | None] = {"Job": "Job", "JobSet": "Job", "Pod": None, "Deployment": "ReplicaSet",
                                    "ReplicaSet": "ReplicaSet", "StatefulSet": "StatefulSet",
                                    "LeaderWorkerSet": "LeaderWorkerSet"}


def templates(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Where a workload's pods take their run time from (kubetwin.io/duration in these annotations), each with the
    part of the workload it is: a Job's, Deployment's, ReplicaSet's or StatefulSet's pod template (""), each of a
    JobSet's replicatedJobs' (its name: the Jobs made from one template share it), a LeaderWorkerSet's leaderTemplate
    and workerTemplate ("": a group's pods run together), a bare Pod's own metadata. Missing or malformed parts are
    left out (validate reports them); the annotations mappings are made where absent."""
    kind, spec = obj.get("kind"), obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    found: list[tuple[str, Any]] = []
    if kind == "Pod":
        found = [("", obj)]
    elif kind in ("Job", "Deployment", "ReplicaSet", "StatefulSet"):
        found = [("", spec.get("template"))]
    elif kind == "JobSet":
        for rj in spec.get("replicatedJobs") or []:
            job = rj.get("template") if isinstance(rj, dict) else None
            job_spec = job.get("spec") if isinstance(job, dict) else None
            if isinstance(job_spec, dict):
                found.append((str(rj.get("name") or ""), job_spec.get("template")))
    elif kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate")
        if isinstance(lwt, dict):
            found = [("", lwt.get("leaderTemplate")), ("", lwt.get("workerTemplate"))]
    out = []
    for part, tmpl in found:
        if not isinstance(tmpl, dict):
            continue
        meta = tmpl.setdefault("metadata", {})
        if not isinstance(meta, dict):
            continue
        ann = meta.setdefault("annotations", {})
        if isinstance(ann, dict):
            out.append((part, ann))
    return out


def rng(seed: int, uid: str) -> random.Random:
    """The draw's own generator: seeded by the run's seed and the object's uid, so order does not matter."""
    return random.Random(f"{seed}/runtime/{uid}")


def _seconds(text: str, what: str) -> float:
    seconds = parse_duration(text)
    if what != "sigma" and seconds <= 0:
        raise ValueError(f"{what} must be greater than 0, got {text!r}")
    return seconds


def parse_dist(text: str, base: Path | None = None) -> RunTime:
    """DIST -> RunTime; ValueError saying what is wrong in the user's words."""
    name, sep, rest = text.partition(":")
    if not sep:  # a plain duration is a fixed run time
        try:
            return RunTime("fixed", _seconds(text, "the run time"), text=text)
        except (UnitError, ValueError):
            raise ValueError(f"unknown distribution {name!r}: want one of {', '.join(KINDS)} "
                             "(fixed:1h, exp:mean=30m, lognormal:median=2h,sigma=0.5, uniform:min=10m,max=1h, "
                             "empirical:FILE) or a duration") from None
    name = name.strip().lower()
    if name not in KINDS:
        raise ValueError(f"unknown distribution {name!r}: want one of {', '.join(KINDS)}")
    if name == "fixed":
        return RunTime("fixed", _seconds(rest, "the run time"), text=text)
    if name == "empirical":
        return _empirical(rest, base, text)
    params: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{name} wants key=value parameters, got {part!r}")
        params[key.strip()] = value.strip()
    want = {"exp": ({"mean"}, ["mean"]), "uniform": ({"min", "max"}, ["min", "max"]),
            "lognormal": ({"median", "mean", "sigma"}, ["sigma"])}[name]
    unknown = sorted(set(params) - want[0])
    missing = [k for k in want[1] if k not in params]
    if unknown or missing:
        raise ValueError(f"{name} takes {', '.join(sorted(want[0]))}" + (
            f"; unknown: {', '.join(unknown)}" if unknown else "") + (
            f"; missing: {', '.join(missing)}" if missing else ""))
    if name == "exp":
        return RunTime("exp", _seconds(params["mean"], "mean"), text=text)
    if name == "uniform":
        lo, hi = parse_duration(params["min"]), _seconds(params["max"], "max")
        if lo > hi:
            raise ValueError(f"uniform's min ({params['min']}) is above its max ({params['max']})")
        return RunTime("uniform", lo, hi, text=text)
    try:
        sigma = float(params["sigma"])
    except ValueError:
        raise ValueError(f"lognormal's sigma must be a number (the log-space deviation), got "
                         f"{params['sigma']!r}") from None
    if not 0 <= sigma <= 10:
        raise ValueError(f"lognormal's sigma must be between 0 and 10, got {params['sigma']}")
    if ("median" in params) == ("mean" in params):
        raise ValueError("lognormal takes exactly one of median= and mean=")
    if "median" in params:
        mu = math.log(_seconds(params["median"], "median"))
    else:
        mu = math.log(_seconds(params["mean"], "mean")) - sigma ** 2 / 2
    return RunTime("lognormal", mu, sigma, text=text)


def _empirical(path_text: str, base: Path | None, text: str) -> RunTime:
    path = Path(path_text.strip())
    if base is not None and not path.is_absolute():
        path = base / path
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the run times file: {exc}") from None
    values = []
    for n, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip().rstrip(",")
        if not line:
            continue
        try:
            values.append(parse_duration(line))
        except (UnitError, ValueError):
            raise ValueError(f"{path}:{n}: not a duration: {line[:40]!r}") from None
    if not values:
        raise ValueError(f"{path} holds no run times (one duration a line)")
    return RunTime("empirical", values=tuple(sorted(values)), text=text)


def parse_rules(values: list[str], flag: str = "--runtime") -> list[Rule]:
    """`--runtime OWNER=DIST` values, in order; KubetwinError naming every bad one, never a traceback."""
    rules: list[Rule] = []
    bad: list[Diagnostic] = []
    for v in values:
        owner, sep, dist = v.partition("=")
        owner = owner.strip()
        parts = owner.split("/")
        if not sep or not (owner == "*" or len(parts) in (2, 3) and all(parts)):
            bad.append(Diagnostic("-", 0, "-", flag, f"Invalid value: {v!r}: want OWNER=DIST", EXAMPLES))
            continue
        if owner != "*":
            parts[-2] = parts[-2].lower()
            owner = "/".join(parts)
        try:
            rules.append(Rule(owner, parse_dist(dist.strip())))
        except ValueError as exc:
            bad.append(Diagnostic("-", 0, "-", flag, f"Invalid value: {v!r}: {exc}", EXAMPLES))
    if bad:
        raise KubetwinError(bad)
    return rules
