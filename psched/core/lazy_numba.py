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
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["LazyNumba", "lazy_numba"]

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
            numba = importlib.import_module("numba")
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
