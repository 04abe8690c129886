"""kubectl's output conventions shared by `get`, `describe` and `api-resources`: the -o formats and their errors,
Go's tabwriter, `-o name`, custom columns, --sort-by, label and field selectors.

Sources (facts, not code): kubernetes/kubectl@dee3483a pkg/cmd/get/{get.go,get_flags.go,customcolumn.go,sorter.go};
kubernetes/cli-runtime@69e8693b pkg/printers/{tabwriter.go,name.go,jsonpath.go}, pkg/genericclioptions/*_flags.go,
pkg/resource/helper.go (EnhanceListError); https://kubernetes.io/docs/reference/kubectl/#custom-columns and
https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/ (its error text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from kubetwin.api import kinds
from kubetwin.cli.jsonpath import JSONPathError, Template, first, go_sprint, relaxed

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["ALLOWED_FORMATS", "KubectlError", "Output", "console", "custom_columns", "field_selector", "label_selector",
           "name_of", "parse_output", "sort_objects", "tabwrite", "table_text"]


class KubectlError(Exception):
    """An error kubectl prints as `error: MESSAGE` (or with its own prefix, e.g. `Error from server (...)`)."""

    def __init__(self, message: str, prefix: str = "error: ") -> None:
        super().__init__(message)
        self.line = prefix + message


# kubectl get's allowed formats in its order (PrintFlags.AllowedFormats: json/yaml, name, templates, custom
# columns, wide) less those the twin does not implement (kyaml, Go templates).
ALLOWED_FORMATS = ("json", "yaml", "name", "jsonpath", "jsonpath-as-json", "jsonpath-file", "custom-columns",
                   "custom-columns-file", "wide")


@dataclass(frozen=True)
class Output:
    """A parsed -o value: the format ("" for the default table) and its template argument."""

    format: str
    arg: str = ""

    @property
    def human(self) -> bool:
        """Whether kubectl prints tables for it (IsHumanReadablePrinter): the default and wide."""
        return self.format in ("", "wide")


def parse_output(value: str | None, allowed: tuple[str, ...] = ALLOWED_FORMATS) -> Output:
    """-o VALUE as kubectl reads it (`-o=json` reaches us as "=json" through click's short-option parsing)."""
    if not value:
        return Output("")
    value = value[1:] if value.startswith("=") else value
    fmt, sep, arg = value.partition("=")
    if fmt in ("jsonpath", "jsonpath-as-json", "jsonpath-file", "custom-columns", "custom-columns-file") \
            and fmt in allowed:
        if fmt.startswith("jsonpath") and not arg:
            raise KubectlError("template format specified but no template given")
        if fmt.startswith("custom-columns") and not arg:
            raise KubectlError("custom-columns format specified but no custom columns given")
        if fmt.endswith("-file"):
            try:
                arg = Path(arg).read_text()
            except OSError as exc:
                raise KubectlError(f"error reading --template {arg}, {exc}") from exc
            fmt = fmt[:-5]
        if fmt.startswith("jsonpath"):
            try:
                Template(arg)
            except JSONPathError as exc:
                raise KubectlError(f"error parsing jsonpath {arg}, {exc}") from exc
        return Output(fmt, arg)
    if sep or value not in allowed:
        raise KubectlError(f'unable to match a printer suitable for the output format "{value}", allowed formats '
                           f'are: {",".join(allowed)}')
    return Output(value)


def tabwrite(text: str, minwidth: int, padding: int) -> str:
    """Go's text/tabwriter with padchar ' ' and no flags: tab-terminated cells aligned per column block (consecutive
    lines that have the column); a line's last cell is never padded. kubectl get uses (6, 3), describe (0, 2)."""
    lines = [line.split("\t") for line in text.split("\n")]
    if len({len(cells) for cells in lines}) == 1:
        return _columns(lines, minwidth, padding)
    col_width: list[list[int]] = [[0] * (len(cells) - 1) for cells in lines]

    def block(col: int, start: int, end: int) -> None:
        i = start
        while i < end:
            if col >= len(lines[i]) - 1:
                i += 1
                continue
            j = i
            width = minwidth
            while j < end and col < len(lines[j]) - 1:
                width = max(width, len(lines[j][col]) + padding)
                j += 1
            for k in range(i, j):
                col_width[k][col] = width
            block(col + 1, i, j)
            i = j

    block(0, 0, len(lines))
    return "\n".join("".join(c.ljust(w) for c, w in zip(cells, col_width[n], strict=False)) + cells[-1]
                     for n, cells in enumerate(lines))


def _columns(lines: list[list[str]], minwidth: int, padding: int) -> str:
    """tabwrite of lines that all have the same cells: one block per column, its width the widest cell's plus
    padding (the table of 150,000 Events that `get events -A` prints at a 1,000,000-pod day's end: one format per
    line, not a padding call per cell)."""
    widths = [max(minwidth, max(map(len, column)) + padding) for column in list(zip(*lines, strict=True))[:-1]]
    line = "".join(f"{{:<{w}}}" for w in widths) + "{}"
    return "\n".join(line.format(*cells) for cells in lines)


GET_MINWIDTH, GET_PADDING = 6, 3  # kubectl get's tabwriter (printers.GetNewTabWriter)


def table_text(rows: list[list[str]]) -> str:
    """Rows through kubectl get's tabwriter (printers.GetNewTabWriter: minwidth 6, padding 3), no final newline."""
    return tabwrite("\n".join("\t".join(r) for r in rows), GET_MINWIDTH, GET_PADDING)


class RememberingTable:
    """kubectl get's tabwriter across flushes: GetNewTabWriter sets liggitt/tabwriter's RememberWidths, so rows
    flushed one watch event at a time stay aligned with the header, a column only ever widening (`get -w`)."""

    def __init__(self) -> None:
        self.widths: list[int] = []

    def text(self, rows: list[list[str]]) -> str:
        """The rows as one flush prints them (no final newline)."""
        for cells in rows:
            for i, cell in enumerate(cells[:-1]):
                width = max(GET_MINWIDTH, len(cell) + GET_PADDING)
                if i == len(self.widths):
                    self.widths.append(width)
                elif width > self.widths[i]:
                    self.widths[i] = width
        return "\n".join("".join(c.ljust(w) for c, w in zip(cells, self.widths, strict=False)) + cells[-1]
                         for cells in rows)


def name_of(obj: dict) -> str:
    """`-o name`: kind[.group]/name, the kind lower-cased (cli-runtime NamePrinter)."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    kind = str(obj.get("kind") or "").lower()
    return f"{kind}.{group}/{obj['metadata']['name']}" if group else f"{kind}/{obj['metadata']['name']}"


def custom_columns(spec: str, objs: list[dict], no_headers: bool) -> str:
    """`-o custom-columns=HEADER:PATH,...` (customcolumn.go): <none> for a missing value, several joined by ','."""
    columns: list[tuple[str, Template]] = []
    if "\n" in spec:  # a custom-columns-file: a header line and a line of specs, whitespace-separated
        head, _, body = spec.strip("\n").partition("\n")
        headers, paths = head.split(), body.split()
        if len(headers) != len(paths):
            raise KubectlError(f"number of headers ({len(headers)}) and field specifications ({len(paths)}) don't "
                               "match")
        pairs = list(zip(headers, paths, strict=True))
    else:
        pairs = []
        for part in spec.split(","):
            header, sep, path = part.partition(":")
            if not sep:
                raise KubectlError(f"unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>")
            pairs.append((header, path))
    for header, path in pairs:
        try:
            columns.append((header, Template(relaxed(path))))
        except JSONPathError as exc:
            raise KubectlError(str(exc)) from exc
    rows = [] if no_headers else [[h for h, _ in columns]]
    for o in objs:
        row = []
        for _, tmpl in columns:
            values = [v for group in tmpl.results(o) for v in group]
            row.append(",".join(go_sprint(v) for v in values) if values else "<none>")
        rows.append(row)
    return table_text(rows) + "\n" if rows else ""


_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def _sort_key(value: Any) -> tuple:
    """sorter.go isLess: missing first, numbers by value, two quantities by amount, other strings by bytes."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str) and _QUANTITY.match(value):
        from kubetwin.k8s.units import parse_quantity

        try:
            return (2, float(parse_quantity(value)), value)
        except Exception:  # noqa: BLE001 - not a quantity after all: compared as text
            pass
    return (3, str(value).encode())


def sort_objects(objs: list[dict], field: str) -> list[dict]:
    """--sort-by FIELD (a JSONPath, relaxed as kubectl does); errors as sorter.go words them."""
    try:
        path = relaxed(field)
        Template(path)
    except JSONPathError as exc:
        raise KubectlError(str(exc)) from exc
    if len(objs) < 2:
        return objs
    values = [first(o, path) for o in objs]
    if all(v is None for v in values):
        raise KubectlError(f'couldn\'t find any field with path "{path}" in the list of objects')
    keys = [_sort_key(v) for v in values]
    kinds_seen = {k[0] for k in keys if k[0] != 0}
    if len(kinds_seen) > 1 and 3 in kinds_seen:  # a string and a number: compare all as text
        keys = [(0,) if v is None else (3, str(v).encode()) for v in values]
    order = sorted(range(len(objs)), key=lambda i: keys[i])
    return [objs[i] for i in order]


# --- label selectors: kubectl's string form parsed into the metav1.LabelSelector the store matches ------------------

_LABEL_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|[^\s!=(),]+)")


def label_selector(text: str) -> dict:
    """`-l a=b,c!=d,e in (x,y),f notin (z),g,!h` (apimachinery labels.Parse) as matchExpressions for k8s.labels.matches;
    errors in labels.Parse's words."""
    tokens = _LABEL_TOKEN.findall(text)
    if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", text):
        raise KubectlError(f"unable to parse requirement: invalid label selector: {text!r}")
    exprs: list[dict] = []
    i = 0

    def need(what: str) -> str:
        nonlocal i
        if i >= len(tokens):
            raise KubectlError(f"unable to parse requirement: found '', expected: {what}")
        tok = tokens[i]
        i += 1
        return tok

    while i < len(tokens):
        if tokens[i] == "!":
            i += 1
            exprs.append({"key": need("identifier"), "operator": "DoesNotExist"})
        else:
            key = need("identifier")
            op = tokens[i] if i < len(tokens) else ","
            if op == ",":
                exprs.append({"key": key, "operator": "Exists"})
            elif op in ("=", "==", "!="):
                i += 1
                value = tokens[i] if i < len(tokens) and tokens[i] != "," else ""
                i += 1 if value else 0
                exprs.append({"key": key, "operator": "NotIn" if op == "!=" else "In", "values": [value]})
            elif op in ("in", "notin"):
                i += 1
                if need("'('") != "(":
                    raise KubectlError(f"unable to parse requirement: found '{tokens[i - 1]}', expected: '('")
                values = []
                while True:
                    tok = need("')'")
                    if tok == ")":
                        break
                    if tok != ",":
                        values.append(tok)
                exprs.append({"key": key, "operator": "In" if op == "in" else "NotIn", "values": values})
            else:
                raise KubectlError(f"unable to parse requirement: found '{op}', expected: in, notin, =, ==, !=, "
                                   "gt, lt")
        if i < len(tokens):
            if tokens[i] != ",":
                raise KubectlError(f"found '{tokens[i]}', expected: ',' or 'end of string'")
            i += 1
    return {"matchExpressions": exprs}


# --- field selectors: what each kind's field label conversion accepts (kubernetes pkg/apis/*/v1/conversion.go) ----
_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": ("metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
            "spec.serviceAccountName", "status.phase", "status.podIP", "status.nominatedNodeName"),
    "Node": ("metadata.name", "spec.unschedulable"),
    "Job": ("metadata.name", "metadata.namespace", "status.successful"),
    "Event": ("metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
              "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion", "reason", "type",
              "source"),
}
_DEFAULTS = {"spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler", "source": ""}


def _field_value(obj: dict, label: str) -> str:
    if label == "source":
        return str(((obj.get("source") or {}).get("component")) or "")
    if label == "status.successful":
        return str((obj.get("status") or {}).get("succeeded") or 0)
    if label == "spec.unschedulable":
        return "true" if (obj.get("spec") or {}).get("unschedulable") else "false"
    v = first(obj, "." + label)
    return _DEFAULTS.get(label, "") if v is None else str(v)


def _gvr(info: kinds.KindInfo) -> str:
    """schema.GroupVersionResource's String(): "/v1, Resource=pods", "batch/v1, Resource=jobs"."""
    return f"{info.group}/{info.versions[0]}, Resource={info.plural}"


def field_selector(text: str, info: kinds.KindInfo, labels: str) -> list[tuple[str, bool, str]]:
    """`--field-selector a=b,c!=d` for one kind: (label, equal, value) triples, or the API server's BadRequest as
    kubectl prints it (helper.go EnhanceListError around the kind's field label conversion)."""
    reqs: list[tuple[str, bool, str]] = []
    for part in (p for p in text.split(",") if p):
        m = re.fullmatch(r"([^=!]+)(==|!=|=)(.*)", part)
        if m is None:
            raise KubectlError(f"invalid selector: '{text}'; can't understand '{part}'")
        reqs.append((m.group(1), m.group(2) != "!=", m.group(3)))
    supported = _FIELDS.get(info.kind) if info.crd is None and info.kind != "Workload" else (
        ("metadata.name",) if not info.namespaced else ("metadata.name", "metadata.namespace"))
    for label, _, _ in reqs:
        if supported is None and label not in ("metadata.name", "metadata.namespace"):
            why = f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'
        elif supported is not None and label not in supported:
            why = f"field label not supported: {label}"
        else:
            continue
        raise KubectlError(f'Unable to find "{_gvr(info)}" that match label selector "{labels}", field selector '
                           f'"{text}": {why}', prefix="Error from server (BadRequest): ")
    return reqs


def field_matches(obj: dict, reqs: list[tuple[str, bool, str]]) -> bool:
    return all((_field_value(obj, label) == value) == equal for label, equal, value in reqs)


def console(stderr: bool = False, **kwargs: Any) -> Console:
    """A rich Console that prints text as given, the only kind the CLI makes: what it prints is user data (names,
    paths, field keys, messages quoting them), so rich must read none of it as markup (`[bold]`) or as an emoji code
    (`file:100:` would print 💯: emoji codes are replaced even with markup off). Styled output uses rich.text.Text."""
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=True, markup=False, emoji=False, highlight=False, **kwargs)


def fail(exc: Exception) -> NoReturn:
    """Print a refusal on stderr and exit 1: each of a KubetwinError's diagnostics as validate renders it, any other
    error as `error: MESSAGE` (the one way every command reports what it refused)."""
    import typer

    from kubetwin.api.errors import KubetwinError

    err = console(stderr=True)
    for line in ([d.render() for d in exc.diagnostics] if isinstance(exc, KubetwinError) else [f"error: {exc}"]):
        err.print(line, markup=False, highlight=False)
    raise typer.Exit(1) from None
