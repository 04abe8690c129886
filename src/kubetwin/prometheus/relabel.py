"""Prometheus' relabelling (prometheus/prometheus model/relabel/relabel.go): the rules a scrape config's
`metric_relabel_configs` apply to every scraped sample's labels, `__name__` included, so a rule can rename a
series, drop it, or drop and rewrite its labels. GMP's PodMonitoring `metricRelabeling` and prometheus-operator's
`metricRelabelings` are written in these terms (camelCase keys) and handed to Prometheus as they are.

Semantics as relabel.go has them: the source labels' values joined by `separator` (default ";") are matched
against `regex`, anchored at both ends ("^(?s:" + regex + ")$", default "(.*)"); `replace` (the default action)
writes `replacement` (default "$1", with $1 / ${1} / $name expanded from the match) into `targetLabel` when the
regex matches, deleting the label when the result is empty; `keep` / `drop` keep or drop the whole series;
`keepequal` / `dropequal` compare the joined value with `targetLabel`'s; `lowercase` / `uppercase` write the case-
folded value; `hashmod` writes md5(value)'s last 8 bytes mod `modulus`; `labelmap` copies every label whose name
matches to the replacement name; `labeldrop` / `labelkeep` remove the labels whose names match / do not match.
A result without `__name__` is no series (the scrape drops it). Action names are read case-insensitively, as
Prometheus' config loader lowercases them (prometheus-operator's CRD lists both spellings)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

ACTIONS = ("replace", "keep", "drop", "keepequal", "dropequal", "hashmod", "labelmap", "labeldrop", "labelkeep",
           "lowercase", "uppercase")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_EXPAND = re.compile(r"\$(\$|\{([^}]*)\}|([a-zA-Z0-9_]+))")


class RelabelError(ValueError):
    """A rule Prometheus' config loader refuses (unknown action, bad regex, replace without targetLabel)."""


def compile_regex(pattern: str) -> re.Pattern[str]:
    """relabel.NewRegexp: anchored at both ends, dot matches newline."""
    try:
        return re.compile(f"^(?s:{pattern})$")
    except re.error as err:
        raise RelabelError(f"invalid regex {pattern!r}: {err}") from None


def _expand(template: str, m: re.Match[str]) -> str:
    """regexp.ExpandString: $1, ${1}, $name, ${name}; $$ is a dollar; a reference to no group is empty (Go takes
    the longest run of name characters, so "$1x" is group "1x", not group 1 then "x")."""
    def sub(ref: re.Match[str]) -> str:
        if ref.group(1) == "$":
            return "$"
        name = ref.group(2) if ref.group(2) is not None else ref.group(3)
        if name.isdigit():
            i = int(name)
            return (m.group(i) or "") if i <= (m.re.groups or 0) else ""
        return (m.groupdict().get(name) or "") if name in m.re.groupindex else ""
    return _EXPAND.sub(sub, template)


class Rule:
    """One relabel_config, checked as the config loader checks it."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.action = str(spec.get("action") or "replace").lower()
        if self.action not in ACTIONS:
            raise RelabelError(f"unknown relabel action {spec.get('action')!r}")
        self.source = [str(s) for s in spec.get("sourceLabels") or spec.get("source_labels") or []]
        self.separator = str(spec["separator"]) if spec.get("separator") is not None else ";"
        regex = spec.get("regex")
        self.regex = compile_regex("(.*)" if regex in (None, "") else str(regex))
        self.target = str(spec.get("targetLabel") or spec.get("target_label") or "")
        self.replacement = str(spec["replacement"]) if spec.get("replacement") is not None else "$1"
        self.modulus = int(spec.get("modulus") or 0)
        if self.action in ("replace", "hashmod", "lowercase", "uppercase", "keepequal", "dropequal") \
                and not self.target:
            raise RelabelError(f"relabel configuration for {self.action} action requires 'targetLabel' value")
        if self.action == "hashmod" and not self.modulus:
            raise RelabelError("relabel configuration for hashmod requires non-zero modulus")

    def apply(self, labels: dict[str, str]) -> bool:
        """Applies the rule to `labels` in place; False when the series is dropped."""
        value = self.separator.join(labels.get(s, "") for s in self.source)
        a = self.action
        if a == "drop":
            return not self.regex.match(value)
        if a == "keep":
            return bool(self.regex.match(value))
        if a == "dropequal":
            return labels.get(self.target, "") != value
        if a == "keepequal":
            return labels.get(self.target, "") == value
        if a == "replace":
            m = self.regex.match(value)
            if m is None:
                return True
            target = _expand(self.target, m)
            if not _LABEL_NAME.fullmatch(target):
                return True
            result = _expand(self.replacement, m)
            if result:
                labels[target] = result
            else:
                labels.pop(target, None)
            return True
        if a in ("lowercase", "uppercase"):
            labels[self.target] = value.lower() if a == "lowercase" else value.upper()
            return True
        if a == "hashmod":
            digest = hashlib.md5(value.encode()).digest()
            labels[self.target] = str(int.from_bytes(digest[8:], "big") % self.modulus)
            return True
        if a == "labelmap":
            for name in list(labels):
                m = self.regex.match(name)
                if m is not None:
                    labels[_expand(self.replacement, m)] = labels[name]
            return True
        for name in list(labels):  # labeldrop / labelkeep
            if bool(self.regex.match(name)) == (a == "labeldrop"):
                del labels[name]
        return True


def compile_rules(specs: Sequence[Mapping[str, Any]] | None) -> list[Rule]:
    return [Rule(s) for s in specs or ()]


def apply_rules(labels: Mapping[str, str], rules: Sequence[Rule]) -> dict[str, str] | None:
    """relabel.Process: the labels after every rule in order, or None when a rule drops them (empty label values
    count as absent, as in Prometheus' label sets)."""
    out = {k: v for k, v in labels.items() if v != ""}
    for rule in rules:
        if not rule.apply(out):
            return None
        out = {k: v for k, v in out.items() if v != ""}
    return out


def process(labels: Mapping[str, str], rules: Sequence[Rule]) -> dict[str, str] | None:
    """metric_relabel_configs over one scraped sample: apply_rules, and a sample left without `__name__` is
    dropped too."""
    out = apply_rules(labels, rules)
    return out if out is not None and out.get("__name__") else None
