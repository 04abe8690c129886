"""Which CEL implementation for DRA selectors and CRD validation rules: compile and evaluate one DRA-style
selector with each Python CEL library (the decision and the numbers: docs/cel.md).

Needs the three libraries, which are not project dependencies:
  pip install cel-python common-expression-language cel-expr-python
Usage: python benchmarks/bench_cel.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

EXPR = ('device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].productName.startsWith('
        '"NVIDIA H100") && device.capacity["gpu.nvidia.com"].memory >= 40')
DEVICE = {"driver": "gpu.nvidia.com", "capacity": {"gpu.nvidia.com": {"memory": 80}},
          "attributes": {"gpu.nvidia.com": {"productName": "NVIDIA H100 80GB HBM3", "index": 3}}}
N = 20_000


def bench(name: str, compile_: Callable[[str], Any], run: Callable[[Any], Any]) -> None:
    t = time.perf_counter()
    prog = compile_(EXPR)
    compiled = time.perf_counter() - t
    assert bool(run(prog)), f"{name} evaluated the selector to false"
    t = time.perf_counter()
    for _ in range(N):
        run(prog)
    each = (time.perf_counter() - t) / N
    print(f"{name:28s} compile {compiled * 1e3:7.2f} ms   evaluate {each * 1e6:8.2f} us")


def main() -> None:
    import cel  # common-expression-language (Rust)
    import celpy  # cel-python (pure Python)
    from cel_expr_python import cel as gcel  # cel-expr-python (Google's cel-cpp)

    env = celpy.Environment()
    activation = {"device": celpy.json_to_cel(DEVICE)}
    bench("cel-python", lambda e: env.program(env.compile(e)), lambda p: p.evaluate(activation))
    bench("common-expression-language", cel.compile, lambda p: p.execute({"device": DEVICE}))
    genv = gcel.NewEnv(variables={"device": gcel.Type.Map(gcel.Type.STRING, gcel.Type.DYN)})
    bench("cel-expr-python", genv.compile, lambda p: p.eval(data={"device": DEVICE}).value())


if __name__ == "__main__":
    main()
