"""``--policy-option NAME=VALUE``: one place (:mod:`psched.policies.options`) reads a policy's
options from its factory's signature; ``simulate``, ``sweep`` and ``serve`` check each pair
against it (one line, exit 2, before any work) and hand the value, of the option's type, to
the policy."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any

import pytest

from psched.cli.main import main
from psched.core import policy as base
from psched.policies import available_policies, policy_factory
from psched.policies.options import REQUIRED, options_from_pairs, policy_options

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "traces" / "run_small.csv"

#: A value other than the default for each of oasis-rp's options, as typed and as parsed.
OASIS_RP = {
    "price_source": ("fixed", "fixed"),
    "estimate_factor": ("2.5", 2.5),
    "prices": ('{"u_worker": 50, "l_worker": 0.5, "u_ps": 20, "l_ps": 0.2}',
               {"u_worker": 50, "l_worker": 0.5, "u_ps": 20, "l_ps": 0.2}),
    "certificate": ("false", False),
    "density_floor": ("0.25", 0.25),
    "promise_rtol": ("0.1", 0.1),
    "repack_gap": ("0.5", 0.5),
    "commit_margin": ("2", 2),
}


@pytest.mark.parametrize("name", available_policies())
def test_a_policys_options_are_its_factorys_keywords_with_their_defaults(name: str) -> None:
    params = {k: p for k, p in inspect.signature(policy_factory(name)).parameters.items()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    opts = policy_options(name)
    assert list(opts) == list(params)
    for k, p in params.items():
        assert opts[k].default == p.default or (p.default is REQUIRED
                                                and opts[k].default is REQUIRED)


def test_every_option_of_oasis_rp_is_covered_here() -> None:
    assert set(OASIS_RP) == set(policy_options("oasis-rp"))


@pytest.fixture()
def made(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every oasis-rp or srtf the run makes (the factories
    wrapped, their signatures kept)."""
    calls: list[dict[str, Any]] = []
    for name in ("oasis-rp", "srtf"):
        real = policy_factory(name)

        @functools.wraps(real)
        def recording(*a: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls.append({"policy": _name, **kw})
            return _real(*a, **kw)

        monkeypatch.setitem(base.REGISTRY, name, recording)
    return calls


def test_every_oasis_rp_option_reaches_the_policy_from_simulate(
        made: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    pairs = [f"{k}={text}" for k, (text, _) in OASIS_RP.items()]
    argv = ["simulate", "--scenario", "oasis-paper", "--jobs", "6", "--slots", "30",
            "--policies", "oasis-rp,srtf", "--no-plots"]
    for pair in pairs:
        argv += ["--policy-option", pair]
    assert main(argv) == 0, capsys.readouterr().err
    rp = [c for c in made if c["policy"] == "oasis-rp"]
    assert rp and all(c == {"policy": "oasis-rp", **{k: v for k, (_, v) in OASIS_RP.items()}}
                      for c in rp)
    assert all(c == {"policy": "srtf"} for c in made if c["policy"] == "srtf")


def test_an_option_reaches_the_policy_from_sweep(made: list[dict[str, Any]], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sweep", "--trace", str(TRACE), "--policies", "oasis-rp,srtf", "--serial",
            "--out", str(tmp_path / "sw"), "--policy-option", "density_floor=0.25"]
    assert main(argv) == 0, capsys.readouterr().err
    want = [{"policy": "oasis-rp", "density_floor": 0.25}, {"policy": "srtf"}]
    assert all(w in made for w in want) and all(m in want for m in made)


def test_a_pair_for_one_policy_goes_to_that_policy_alone() -> None:
    got = options_from_pairs(["oasis", "oasis-rp"], ["oasis-rp:certificate=false",
                                                     "estimate_factor=3"])
    assert got == {"oasis": {"estimate_factor": 3.0},
                   "oasis-rp": {"certificate": False, "estimate_factor": 3.0}}


@pytest.mark.parametrize(("pair", "message"), [
    ("density_floor", "expected NAME=VALUE or POLICY:NAME=VALUE, got 'density_floor'"),
    ("=1", "expected NAME=VALUE"),
    ("nope=1", "no option 'nope': oasis-rp takes price_source, estimate_factor, prices"),
    ("density_floor=half", "oasis-rp option 'density_floor' takes a number, got 'half'"),
    ("density_floor=nan", "takes a number, got 'nan'"),
    ("commit_margin=1.5", "oasis-rp option 'commit_margin' takes an integer, got '1.5'"),
    ("certificate=maybe", "oasis-rp option 'certificate' takes true or false"),
    ("prices={u_worker", "oasis-rp option 'prices' takes a JSON value"),
    ("fifo:trim=false", "policy 'fifo' is not run here"),
    ("repack_gap=0", "oasis-rp: repack_gap must be in (0, 1]"),
])
@pytest.mark.parametrize("command", ["simulate", "sweep", "serve"])
def test_a_bad_option_is_one_line_and_exit_2_before_any_work(
        command: str, pair: str, message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = {"simulate": ["simulate", "--scenario", "oasis-paper", "--jobs", "4",
                         "--policies", "oasis-rp", "--out", str(out)],
            "sweep": ["sweep", "--trace", str(TRACE), "--policies", "oasis-rp", "--serial",
                      "--out", str(out)],
            "serve": ["serve", "--dir", str(out)]}[command]
    assert main([*argv, "--policy-option", pair]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("psched: error: --policy-option: ")
    assert not out.exists()


def test_serve_runs_oasis_rp_by_default_and_its_help_lists_only_real_options(
        capsys: pytest.CaptureFixture[str]) -> None:
    from psched.cli.main import build_parser

    args = build_parser("serve").parse_args(["serve"])
    assert args.policy == "oasis-rp"
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = capsys.readouterr().out
    assert "defer" not in text
    assert "oasis-rp: price_source=online" in text
    for name in policy_options("oasis-rp"):
        assert name in text
