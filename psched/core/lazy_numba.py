"""Numba on first use: a module's ``@numba.njit(signature)`` functions compiled when one of
them is first called, not when the module is imported.

``import numba`` costs about half a CPU second and loading each signature's compiled code
from the on-disk cache more; a module that compiles eagerly (an explicit signature compiles
at decoration) puts that on every ``import psched.policies``, so on every CLI command
(``psched --help`` included) and every process that only lists the policies. A module opts
in with one line in place of ``import numba``::

    numba = lazy_numba(__name__)

and keeps its code as it was: ``numba.njit(...)`` decorators, and type expressions at module
level such as ``numba.types.Array(numba.int64, 1, "C", readonly=True)`` or
``numba.float64[:, ::1]``, are recorded, not evaluated. At the first call of any of its
functions :meth:`LazyNumba.load` imports numba, puts the real module in place of the stand-in
(so compiled bodies that name ``numba`` see it), and compiles every recorded function in the
order they were defined -- each with the arguments it was given, so the same signatures,
``cache=True`` and the same machine code as an eager compile -- binding each dispatcher to its
name in the module. Later calls go to the dispatchers directly (the module's functions look
their callees up by name); a compiled function calling another one sees the dispatcher it
calls, compiled before it.

Complexity: the first call pays what the import used to (once per process); later calls
cost nothing extra.

Start-up cost. The first run on a machine compiles every kernel (seconds to tens of seconds);
``cache=True`` keeps the machine code on disk (numba's cache: ``__pycache__`` beside the
source, or ``NUMBA_CACHE_DIR``), so later processes load it (a fraction of a second). Either
is a one-off cost of the process, not of the call that happens to come first: a caller that
times calls pays it beforehand (:func:`psched.runs.runner.run_simulation` runs each policy on
a few jobs first). :func:`startup_seconds` is this process's total so far (loading, compiling:
a timed section whose total moved paid some of it), and :func:`on_compile` names a hook to
call when numba starts compiling (to tell the user why the first run pauses).
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["LazyNumba", "lazy_numba", "on_compile", "startup_seconds"]

F = TypeVar("F", bound=Callable[..., Any])


class _Deferred:
    """A numba expression written at import time (``numba.int64``, ``numba.float64[::1]``,
    ``numba.types.Array(...)``), evaluated against the real module by :meth:`value`."""

    def __init__(self, op: str, base: _Deferred | None, arg: Any) -> None:
        self._op, self._base, self._arg = op, base, arg

    def __getattr__(self, name: str) -> _Deferred:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Deferred("attr", self, name)

    def __getitem__(self, key: Any) -> _Deferred:
        return _Deferred("item", self, key)

    def __call__(self, *args: Any, **kwargs: Any) -> _Deferred:
        return _Deferred("call", self, (args, kwargs))

    def value(self, numba: Any) -> Any:
        """The expression evaluated with ``numba`` the real module."""
        if self._base is None:
            return numba
        base = self._base.value(numba)
        if self._op == "attr":
            return getattr(base, self._arg)
        if self._op == "item":
            return base[_value(self._arg, numba)]
        args, kwargs = self._arg
        return base(*_value(args, numba), **_value(kwargs, numba))


def _value(x: Any, numba: Any) -> Any:
    """``x`` with every :class:`_Deferred` in it (tuples, lists, dicts) evaluated."""
    if isinstance(x, _Deferred):
        return x.value(numba)
    if isinstance(x, tuple | list):
        return type(x)(_value(v, numba) for v in x)
    if isinstance(x, dict):
        return {k: _value(v, numba) for k, v in x.items()}
    return x


class _LazyFunction:
    """A function to compile with ``numba.njit(*args, **kwargs)`` on the first call of any
    function of its module."""

    def __init__(self, owner: LazyNumba, py_func: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.owner, self.py_func, self.args, self.kwargs = owner, py_func, args, kwargs
        self.__name__ = py_func.__name__
        self.__doc__ = py_func.__doc__
        self.__wrapped__ = py_func
        self.dispatcher: Any = None

    def __call__(self, *args: Any) -> Any:
        if self.dispatcher is None:
            self.owner.load()
        return self.dispatcher(*args)


class _StartupClock:
    """Seconds spent loading lazy modules and compiling numba functions in this process.

    A numba ``numba:compile`` listener (installed by the first :meth:`LazyNumba.load`) adds
    each outermost compilation (nested ones run inside it) and calls the hooks when one
    starts; :meth:`LazyNumba.load` adds its own time, the compilations inside it included.
    numba compiles under one global lock, so one compilation runs at a time."""

    def __init__(self) -> None:
        self.seconds = 0.0  #: total so far, s
        self.hooks: list[Callable[[], None]] = []  #: called when a compilation starts
        self.in_load = 0  #: >0 while a load runs (its time is added as a whole)
        self._depth = 0
        self._start = 0.0
        self._listening = False

    def listen(self, numba: Any) -> None:
        """Install the compile listener (once)."""
        if self._listening:
            return
        event = importlib.import_module("numba.core.event")
        clock = self

        class _Listener(event.Listener):  # type: ignore[misc,name-defined]
            def on_start(self, ev: Any) -> None:
                clock._depth += 1
                if clock._depth == 1:
                    clock._start = time.perf_counter()
                    for hook in list(clock.hooks):
                        hook()

            def on_end(self, ev: Any) -> None:
                clock._depth -= 1
                if clock._depth == 0 and not clock.in_load:
                    clock.seconds += time.perf_counter() - clock._start

        event.register("numba:compile", _Listener())
        self._listening = True


_CLOCK = _StartupClock()


def startup_seconds() -> float:
    """Seconds this process has spent importing numba, loading cached kernels of lazy
    modules and compiling numba functions, so far."""
    return _CLOCK.seconds


def on_compile(hook: Callable[[], None]) -> Callable[[], None]:
    """Call ``hook()`` whenever numba starts compiling (not when it loads a cached kernel);
    returns the function that removes the hook."""
    _CLOCK.hooks.append(hook)

    def remove() -> None:
        if hook in _CLOCK.hooks:
            _CLOCK.hooks.remove(hook)
    return remove


class LazyNumba(_Deferred):
    """The stand-in for ``numba`` in the module named ``module`` (:func:`lazy_numba`)."""

    def __init__(self, module: str) -> None:
        super().__init__("root", None, None)
        self._module = module
        self._functions: list[_LazyFunction] = []
        self._lock = threading.Lock()
        self._loaded = False

    def njit(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:
        """``numba.njit(*args, **kwargs)``, recorded: the decorated function is compiled
        by :meth:`load` (typed as the function it stands for)."""
        def record(py_func: F) -> F:
            fn = _LazyFunction(self, py_func, args, kwargs)
            self._functions.append(fn)
            return cast(F, fn)
        return record

    def load(self) -> None:
        """Import numba and compile the module's functions (once; thread-safe)."""
        with self._lock:
            if self._loaded:
                return
            t0 = time.perf_counter()
            _CLOCK.in_load += 1
            try:
                self._load()
            finally:
                _CLOCK.in_load -= 1
                _CLOCK.seconds += time.perf_counter() - t0

    def _load(self) -> None:
        """:meth:`load`'s work, its lock held."""
        numba = importlib.import_module("numba")
        _CLOCK.listen(numba)
        space = sys.modules[self._module].__dict__
        for name, v in list(space.items()):  # the module's own names: the real module
            if v is self:
                space[name] = numba
        for fn in self._functions:  # in definition order: callees first
            fn.dispatcher = numba.njit(*_value(fn.args, numba),
                                       **_value(fn.kwargs, numba))(fn.py_func)
            if space.get(fn.__name__) is fn:
                space[fn.__name__] = fn.dispatcher
        self._loaded = True

    @property
    def loaded(self) -> bool:
        """True once :meth:`load` ran."""
        return self._loaded


def lazy_numba(module: str) -> LazyNumba:
    """A stand-in for ``numba`` in the module named ``module`` (its ``__name__``): see the
    module docstring."""
    return LazyNumba(module)
