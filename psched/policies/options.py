"""A policy's options, read from its factory's signature: the one place that knows them.

Every keyword of a registered factory (:func:`psched.policies.policy_factory`) is an option,
with its type from the annotation (``int``, ``float``, ``bool``, ``str``, optionally ``| None``;
anything else is given as JSON) and its default. The command line gives options as
``--policy-option NAME=VALUE`` (``simulate``, ``sweep``, ``serve``, ``run``); with several
policies, a pair goes to every policy that takes NAME, and ``POLICY:NAME=VALUE`` to one.

>>> policy_options("drf")["shares"]
PolicyOption(name='shares', kind='str', default='combined', optional=False)
>>> options_from_pairs(["drf", "fifo"], ["shares=per_pool", "fifo:trim=false"])
{'drf': {'shares': 'per_pool'}, 'fifo': {'trim': False}}
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psched.core.errors import InputError
from psched.core.policy import Policy
from psched.policies import policy_factory

__all__ = ["REQUIRED", "PolicyOption", "check_options", "checked_policy", "describe_options",
           "open_ended", "options_from_pairs", "parse_value", "policy_options", "policy_variant"]

#: The default of an option the factory requires.
REQUIRED: Any = inspect.Parameter.empty
#: Annotations read as one of the plain kinds; any other is given as JSON.
_KINDS = ("int", "float", "bool", "str")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


@dataclass(frozen=True, kw_only=True)
class PolicyOption:
    """One keyword of a policy's factory."""

    name: str  #: the keyword
    kind: str  #: "int", "float", "bool", "str", or "json" (any other annotation)
    default: Any  #: the factory's default (:data:`REQUIRED` if none)
    optional: bool  #: None is a value too (the annotation is ``X | None``)


def _option(p: inspect.Parameter) -> PolicyOption:
    text = p.annotation if isinstance(p.annotation, str) else getattr(
        p.annotation, "__name__", str(p.annotation))
    parts = [t.strip() for t in str(text).split("|")]
    optional = "None" in parts
    rest = [t for t in parts if t != "None"]
    kind = rest[0] if len(rest) == 1 and rest[0] in _KINDS else "json"
    return PolicyOption(name=p.name, kind=kind, default=p.default, optional=optional)


def _parameters(name: str) -> Mapping[str, inspect.Parameter]:
    try:
        factory = policy_factory(name)
    except KeyError as err:
        raise InputError(str(err.args[0]), field="policy") from None
    return inspect.signature(factory).parameters


def policy_options(name: str) -> dict[str, PolicyOption]:
    """Every option of policy ``name``, by keyword, in the factory's order.

    Raises
    ------
    InputError
        No policy of that name.
    """
    return {k: _option(p) for k, p in _parameters(name).items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def open_ended(name: str) -> bool:
    """Whether the factory also takes keywords it does not name (``**options``): those pass
    unchecked here, and the policy refuses what it does not take when it is made."""
    return any(p.kind is p.VAR_KEYWORD for p in _parameters(name).values())


def parse_value(policy: str, option: PolicyOption, text: str,
                field: str = "--policy-option") -> Any:
    """``text`` as a value of ``option``.

    Raises
    ------
    InputError
        ``text`` is not of the option's kind, in one line naming policy and option.
    """
    if option.optional and text.strip().lower() in ("none", "null"):
        return None
    where = f"{policy} option {option.name!r}"
    if option.kind == "str":
        return text
    if option.kind == "bool":
        low = text.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise InputError(f"{where} takes true or false, got {text!r}", path=field)
    if option.kind in ("int", "float"):
        try:
            value: Any = int(text) if option.kind == "int" else float(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value):
            what = "an integer" if option.kind == "int" else "a number"
            raise InputError(f"{where} takes {what}, got {text!r}", path=field)
        return value
    try:
        return json.loads(text)
    except ValueError:
        raise InputError(f"{where} takes a JSON value, got {text!r}", path=field) from None


def _split(pair: str, field: str) -> tuple[str | None, str, str]:
    """``[POLICY:]NAME=VALUE`` as (policy or None, name, value)."""
    key, eq, value = pair.partition("=")
    policy, colon, name = key.strip().rpartition(":")
    if not eq or not name.isidentifier() or (colon and not policy):
        raise InputError(f"expected NAME=VALUE or POLICY:NAME=VALUE, got {pair!r}",
                         path=field)
    return (policy or None), name, value


def options_from_pairs(policies: Sequence[str], pairs: Sequence[str],
                       field: str = "--policy-option") -> dict[str, dict[str, Any]]:
    """The options each of ``policies`` gets from ``NAME=VALUE`` pairs: a pair goes to every
    policy that takes NAME (``POLICY:NAME=VALUE``: to POLICY alone); a later pair wins.

    Raises
    ------
    InputError
        In one line: a malformed pair, a POLICY not among ``policies``, a NAME that no policy
        it is meant for takes (the options they take are listed), or a VALUE not of its kind.
    """
    out: dict[str, dict[str, Any]] = {p: {} for p in policies}
    for pair in pairs:
        target, name, text = _split(pair, field)
        if target is not None and target not in out:
            raise InputError(f"{pair!r}: policy {target!r} is not run here (policies: "
                             f"{', '.join(policies)})", path=field)
        meant = [target] if target else list(policies)
        took = False
        for policy in meant:
            opts = policy_options(policy)
            if name in opts:
                out[policy][name] = parse_value(policy, opts[name], text, field)
                took = True
            elif target and open_ended(policy):  # checked when the policy is made
                out[policy][name] = _json_or_text(text)
                took = True
        if not took:
            listed = "; ".join(f"{p} takes {', '.join(policy_options(p)) or 'none'}"
                               for p in meant)
            raise InputError(f"no option {name!r}: {listed}", path=field)
    return out


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def policy_variant(text: str, field: str = "--policy") -> tuple[str, dict[str, Any]]:
    """``POLICY`` or ``POLICY:NAME=VALUE[:NAME=VALUE...]`` (``;`` separates too) as the policy
    and its options, each checked as :func:`options_from_pairs` checks it.

    >>> policy_variant("oasis-rp:density_floor=0:commit_margin=1")
    ('oasis-rp', {'density_floor': 0.0, 'commit_margin': 1})

    Raises
    ------
    InputError
        An unknown policy or option, or a value not of its kind, in one line.
    """
    name, _, rest = text.partition(":")
    pairs = [p for p in rest.replace(";", ":").split(":") if p]
    return name, options_from_pairs([name], pairs, field)[name]


def check_options(name: str, options: Mapping[str, Any], field: str = "policy_options") -> None:
    """Refuse an option ``name``'s factory does not take (options given as values).

    Raises
    ------
    InputError
        The first unknown option, with the options the policy takes, in one line.
    """
    known = policy_options(name)
    unknown = sorted(set(options) - set(known))
    if unknown and not open_ended(name):
        raise InputError(f"{name} has no option {unknown[0]!r}; it takes: "
                         f"{', '.join(known) or 'none'}", path=field)


def checked_policy(name: str, options: Mapping[str, Any],
                   field: str = "--policy-option") -> Policy:
    """Policy ``name`` made with ``options``; what its factory refuses (a value out of range,
    a combination it does not take) is one line.

    Raises
    ------
    InputError
        No policy of that name, or the factory's ``TypeError`` or ``ValueError``, with the
        policy named.
    """
    try:
        factory = policy_factory(name)
    except KeyError as err:
        raise InputError(str(err.args[0]), path="--policy") from None
    try:
        return factory(**options)
    except (TypeError, ValueError) as err:
        raise InputError(f"{name}: {err}", path=field) from None


def describe_options(name: str) -> str:
    """``NAME=DEFAULT`` for every option of ``name`` (a required one: ``NAME=?``), for help
    texts."""
    def shown(o: PolicyOption) -> str:
        if o.default is REQUIRED:
            return "?"
        return "none" if o.default is None else (
            o.default if isinstance(o.default, str) else json.dumps(o.default))

    return ", ".join(f"{o.name}={shown(o)}" for o in policy_options(name).values())
