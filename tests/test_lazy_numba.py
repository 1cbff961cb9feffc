"""Numba on first use (psched/core/lazy_numba.py): importing the policies (every CLI command,
``psched --help`` included) does not import numba; the first call of a compiled function
compiles its module's functions with the signatures they were given, callees first, and
later calls go straight to numba's dispatchers. The results are those of the eager compile
(test_rp_search.py compares the compiled search with the reference bit for bit)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from psched.core.lazy_numba import LazyNumba, lazy_numba

ROOT = Path(__file__).resolve().parents[1]


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``code``."""
    probe = code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    return set(out.stdout.split())


def test_importing_the_policies_and_the_cli_does_not_import_numba():
    code = textwrap.dedent("""
        import contextlib, io
        from psched.cli.main import main
        from psched.policies import available_policies
        assert "oasis-rp" in available_policies()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main(["--help"])
    """)
    mods = _modules_after(code)
    assert "psched.policies.oasis_rp.dp" in mods and "psched.policies.oasis_rp" in mods
    assert "numba" not in mods


def _module(source: str) -> types.ModuleType:
    """A module made from ``source`` (registered in sys.modules, as lazy_numba needs)."""
    name = f"_lazy_numba_probe_{abs(hash(source))}"
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)
    return mod


SOURCE = textwrap.dedent('''
    from psched.core.lazy_numba import lazy_numba
    numba = lazy_numba(__name__)
    RO = numba.types.Array(numba.int64, 1, "C", readonly=True)

    @numba.njit("int64(int64)")
    def twice(x):
        return 2 * x

    @numba.njit(numba.int64(RO))
    def total_twice(a):
        s = 0
        for v in a:
            s += twice(v)
        return s

    def call(a):
        return total_twice(a)
''')


def test_the_first_call_compiles_every_function_with_its_signature_callees_first():
    import numba

    mod = _module(SOURCE)
    lazy = mod.numba
    assert isinstance(lazy, LazyNumba) and not lazy.loaded
    a = np.arange(5, dtype=np.int64)
    a.flags.writeable = False
    assert mod.call(a) == 20
    assert lazy.loaded and mod.numba is numba  # compiled bodies see the real module
    for fn in (mod.twice, mod.total_twice):  # bound to their names: no wrapper left
        assert isinstance(fn, numba.core.registry.CPUDispatcher)
    ro = numba.types.Array(numba.int64, 1, "C", readonly=True)
    assert mod.total_twice.signatures == [(ro,)]
    assert mod.twice.signatures == [(numba.int64,)]
    assert mod.call(a) == 20


def test_a_function_kept_from_before_the_first_call_still_calls_the_compiled_code():
    mod = _module(SOURCE.replace("def call", "def call_"))
    early = mod.twice  # taken before anything compiled
    assert early(21) == 42
    assert mod.twice(4) == 8 and early(1) == 2


def test_deferred_type_expressions_evaluate_to_numba_types():
    import numba

    lazy = lazy_numba("nowhere")
    assert lazy.float64[:, ::1].value(numba) == numba.float64[:, ::1]
    expr = lazy.void(lazy.float64[:, :, ::1], lazy.boolean[::1])
    assert expr.value(numba) == numba.void(numba.float64[:, :, ::1], numba.boolean[::1])
    with pytest.raises(AttributeError):
        lazy.__wrapped_missing__  # noqa: B018 - dunder lookups are not deferred


def test_a_compilation_is_announced_once_and_counted_as_start_up():
    """numba compiling a function (no signature: at its first call) calls the hooks and adds
    to :func:`startup_seconds`; a call of the compiled code does neither."""
    from psched.core.lazy_numba import on_compile, startup_seconds

    mod = _module(textwrap.dedent('''
        from psched.core.lazy_numba import lazy_numba
        numba = lazy_numba(__name__)

        @numba.njit(nogil=True)
        def cube(x):
            return x * x * x
    '''))
    started: list[int] = []
    remove = on_compile(lambda: started.append(1))
    try:
        before = startup_seconds()
        assert mod.cube(3) == 27  # load, then numba compiles cube for int64
        assert started == [1] and startup_seconds() > before
        before = startup_seconds()
        assert mod.cube(4) == 64
        assert started == [1] and startup_seconds() == before
    finally:
        remove()
    assert mod.cube(2.0) == 8.0 and started == [1]  # a hook removed is not called


def test_no_decision_of_a_simulation_pays_the_start_up_of_the_kernels():
    """A fresh process (numba's disk cache as the machine has it: cold on the first run,
    compiled then): oasis-rp's kernels are loaded or compiled before its timed run, never
    inside it (the runner warns when the start-up clock moves during a run)."""
    code = textwrap.dedent("""
        import warnings
        from psched.core import lazy_numba
        from psched.runs.runner import PschedWarning, SimulateRequest, run_simulation
        req = SimulateRequest(trace="traces/demo_sim.csv", jobs=20, slots=60,
                              policies="oasis-rp", progress=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_simulation(req)
        late = [str(w.message) for w in caught if issubclass(w.category, PschedWarning)
                and "numba" in str(w.message)]
        assert lazy_numba.startup_seconds() > 0 and not late, late
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=300)
