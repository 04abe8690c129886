"""The suite's own rules (issue 33): no test passes vacuously. A test whose every check sits in a loop over something
computed (or in an `if` without an `else` that checks too) passes when the loop runs over nothing; it must also
check, unconditionally, that there is something to loop over (`assert rows`), or collect and assert once."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _literal(node: ast.expr, assigned: dict[str, ast.expr]) -> bool:
    """Whether a loop over `node` cannot be empty: a non-empty literal (or a name bound to one in the test), or
    range/enumerate/zip/sorted/reversed of such."""
    if isinstance(node, ast.Name) and node.id in assigned:
        return _literal(assigned[node.id], {})
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        if node.func.id == "range":
            return all(isinstance(a, ast.Constant) for a in node.args)
        if node.func.id in ("enumerate", "zip", "sorted", "reversed"):
            return _literal(node.args[0], assigned)
    return False


def _checks(body: list[ast.stmt], assigned: dict[str, ast.expr]) -> bool:
    """Whether `body` checks something whatever the data: an assert or a call (a helper that asserts, pytest.fail)
    at its level, a `with pytest.raises`, an if/else checking in both branches, a loop that cannot be empty."""
    for node in body:
        if isinstance(node, ast.Assert) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
            return True
        if isinstance(node, (ast.With, ast.AsyncWith)):
            if any("raises" in ast.unparse(i.context_expr) or "warns" in ast.unparse(i.context_expr)
                   for i in node.items) or _checks(node.body, assigned):
                return True
        if isinstance(node, ast.If) and node.orelse and _checks(node.body, assigned) and _checks(node.orelse,
                                                                                                   assigned):
            return True
        if isinstance(node, (ast.For, ast.AsyncFor)) and _literal(node.iter, assigned) and _checks(node.body,
                                                                                                   assigned):
            return True
        if isinstance(node, ast.Try) and _checks(node.body, assigned):
            return True
    return False


def vacuous_tests(source: str) -> list[str]:
    """The test functions of a module that assert only where the data may leave nothing to check."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.name.startswith("test"):
            continue
        assigned = {t.id: n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                    for t in n.targets if isinstance(t, ast.Name)}
        if any(isinstance(n, ast.Assert) for n in ast.walk(fn)) and not _checks(fn.body, assigned):
            found.append(f"{fn.name} (line {fn.lineno})")
    return found


def test_no_test_checks_only_inside_a_loop_that_may_be_empty() -> None:
    modules = sorted(TESTS.glob("test_*.py"))
    assert len(modules) > 100
    found = {p.name: v for p in modules if (v := vacuous_tests(p.read_text()))}
    assert found == {}, "assert that there is something to loop over (or collect, then assert once)"


def test_the_rule_tells_a_vacuous_test_from_a_guarded_one() -> None:
    vacuous = '''
def test_rows():
    for r in load():
        assert r.ok
def test_maybe():
    if cond():
        assert x
'''
    guarded = '''
def test_rows():
    rows = load()
    assert rows
    for r in rows:
        assert r.ok
def test_cases():
    cases = [(1, 2), (3, 4)]
    for a, b in cases:
        assert a < b
def test_both():
    if cond():
        assert x
    else:
        assert not y
def test_range():
    for i in range(3):
        assert i < 3
'''
    assert vacuous_tests(vacuous) == ["test_rows (line 2)", "test_maybe (line 5)"]
    assert vacuous_tests(guarded) == []
