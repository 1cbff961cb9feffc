"""Built-in workloads learn, their gradients are right, and the registry is safe."""

from __future__ import annotations

import pickle
from itertools import islice

import numpy as np
import pytest
from finite_differences import central_differences
from threadpoolctl import threadpool_limits

from psched.core.errors import InputError
from ray_cluster.ps.optim import MomentumSGD
from ray_cluster.workloads.builtin import MLP, Batch, Workload, available_workloads, get_workload


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():  # tiny matrices on a shared machine: BLAS threads only contend
    with threadpool_limits(limits=1):
        yield


BUILTINS = [
    ("softmax", {}),
    ("mlp", {}),
    ("softmax", {"dataset": "digits-hard"}),
    ("mlp", {"dataset": "digits-hard"}),
    ("torch-mlp", {"device": "cpu"}),
]


def _make(name: str, hparams: dict) -> Workload:
    if name.startswith("torch"):
        pytest.importorskip("torch")
    return get_workload(name, hparams)


def _train(wl: Workload, steps: int, seed: int) -> tuple[np.ndarray, list[float]]:
    params = wl.init_params(seed)
    opt = MomentumSGD(lr=0.1, momentum=0.0)
    state = opt.init(params.size)
    batches = wl.batches(wl.partition(1, 0), 32, np.random.default_rng(seed))
    losses = []
    for batch in islice(batches, steps):
        loss, grad = wl.gradient(params, batch)
        losses.append(loss)
        params, state = opt.update(params, grad, state)
    return params, losses


@pytest.mark.parametrize(("name", "hparams"), BUILTINS,
                         ids=[f"{n}-{h.get('dataset', 'digits')}" for n, h in BUILTINS])
@pytest.mark.parametrize("seed", [0, 1])
def test_plain_sgd_lowers_loss_and_raises_heldout_accuracy(name: str, hparams: dict,
                                                           seed: int) -> None:
    wl = _make(name, hparams)
    p0 = wl.init_params(seed)
    before = wl.evaluate(p0)
    params, losses = _train(wl, 300, seed)
    after = wl.evaluate(params)
    assert np.mean(losses[-30:]) < 0.8 * np.mean(losses[:10])
    assert after["loss"] < before["loss"]
    assert after["accuracy"] > before["accuracy"] + 0.2
    assert params.dtype == np.float32 and params.shape == p0.shape


@pytest.mark.parametrize("hparams", [{"hidden": 0}, {"hidden": 7, "activation": "tanh"},
                                     {"hidden": 7, "activation": "relu"}],
                         ids=["softmax", "tanh", "relu"])
def test_mlp_gradient_matches_finite_differences(hparams: dict) -> None:
    wl = MLP(**hparams)
    rng = np.random.default_rng(3)
    params = wl.init_params(3).astype(np.float64) + rng.normal(0, 0.05, wl.n_params)
    rows = rng.choice(wl.data.y_train.size, 20, replace=False)
    batch = Batch(x=wl.data.x_train[rows], y=wl.data.y_train[rows])
    loss, grad = wl.gradient(params, batch)
    assert loss == pytest.approx(wl.loss(params, batch))
    idx = rng.choice(wl.n_params, 40, replace=False)
    fd = central_differences(lambda p: wl.loss(p, batch), params, idx)
    assert grad[idx] == pytest.approx(fd, rel=1e-3, abs=1e-6)


def test_torch_mlp_gradient_equals_numpy_mlp_gradient() -> None:
    pytest.importorskip("torch")
    tw = get_workload("torch-mlp", {"hidden": 16, "device": "cpu"})
    nw = MLP(hidden=16)
    tp = tw.init_params(5)
    d, h, c = 64, 16, 10
    w1, b1 = tp[:h * d].reshape(h, d), tp[h * d:h * d + h]
    w2, b2 = tp[h * d + h:h * d + h + c * h].reshape(c, h), tp[-c:]
    n_params = np.concatenate([w1.T.ravel(), b1, w2.T.ravel(), b2])
    batch = next(tw.batches(tw.partition(1, 0), 50, np.random.default_rng(0)))
    tl, tg = tw.gradient(tp, batch)
    nl, ng = nw.gradient(n_params, batch)
    assert tl == pytest.approx(nl, rel=1e-5)
    tg_as_numpy = np.concatenate([tg[:h * d].reshape(h, d).T.ravel(), tg[h * d:h * d + h],
                                  tg[h * d + h:h * d + h + c * h].reshape(c, h).T.ravel(),
                                  tg[-c:]])
    np.testing.assert_allclose(tg_as_numpy, ng, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dataset", ["digits", "digits-hard"])
@pytest.mark.parametrize("n_parts", [1, 3, 8])
def test_partitions_are_disjoint_and_cover_the_training_set(dataset: str, n_parts: int) -> None:
    wl = MLP(dataset=dataset)
    parts = [wl.partition(n_parts, i) for i in range(n_parts)]
    rows = np.concatenate([p.rows for p in parts])
    assert np.array_equal(np.sort(rows), np.arange(wl.data.y_train.size))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_batches_are_full_seeded_and_each_pass_is_a_permutation() -> None:
    wl = MLP()
    part = wl.partition(5, 2)
    one = list(islice(wl.batches(part, 7, np.random.default_rng(9)), 200))
    two = list(islice(wl.batches(part, 7, np.random.default_rng(9)), 200))
    assert all(len(b) == 7 for b in one)
    assert all(np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y) for a, b in zip(one, two,
                                                                                   strict=True))
    # the first len(part) examples drawn are the partition, each once
    xs = np.concatenate([b.x for b in one])[:len(part)]
    expected = wl.data.x_train[part.rows]
    assert np.array_equal(np.unique(xs, axis=0), np.unique(expected, axis=0))


def test_hard_task_is_harder_than_digits_under_the_same_budget() -> None:
    easy, hard = MLP(), MLP(dataset="digits-hard")
    acc_easy = easy.evaluate(_train(easy, 300, 0)[0])["accuracy"]
    acc_hard = hard.evaluate(_train(hard, 300, 0)[0])["accuracy"]
    assert acc_hard < acc_easy - 0.1


@pytest.mark.parametrize("name", ["softmax", "mlp", "torch-mlp"])
def test_workloads_pickle_as_hyperparameters_only(name: str) -> None:
    wl = _make(name, {"dataset": "digits-hard", "split_seed": 4})
    _ = wl.evaluate(wl.init_params(0))  # data loaded and cached in this process
    blob = pickle.dumps(wl)
    assert len(blob) < 1000
    again = pickle.loads(blob)
    assert again == wl
    assert np.array_equal(again.init_params(2), wl.init_params(2))


def test_same_split_seed_same_split_and_different_seed_different_split() -> None:
    a, b, c = MLP(split_seed=1), MLP(split_seed=1), MLP(split_seed=2)
    assert np.array_equal(a.data.y_test, b.data.y_test)
    assert not np.array_equal(a.data.x_test, c.data.x_test)


def test_registry_refuses_import_paths_unless_allowed() -> None:
    with pytest.raises(InputError, match="allow_import"):
        get_workload("ray_cluster.workloads.builtin:MLP", {"hidden": 4})
    wl = get_workload("ray_cluster.workloads.builtin:MLP", {"hidden": 4}, allow_import=True)
    assert isinstance(wl, MLP) and wl.hidden == 4


@pytest.mark.parametrize(("spec", "hparams", "match"), [
    ("resnet9000", {},
     "unknown workload 'resnet9000'; known: mlp, softmax, torch-cnn, torch-lm, torch-mlp"),
    ("mlp", {"hiden": 3}, "hparams.hiden: unknown hyper-parameter of 'mlp'"),
    ("mlp", {"dataset": "cifar"},
     "hparams.dataset: expected one of digits, digits-hard, got 'cifar'"),
    ("no.such.module:Thing", {}, "cannot import 'no.such.module:Thing'"),
    ("collections:OrderedDict", {}, "does not implement Workload"),
])
def test_bad_workload_spec_gives_one_line_error(spec: str, hparams: dict, match: str) -> None:
    with pytest.raises(InputError) as info:
        get_workload(spec, hparams, allow_import=True)
    assert match in str(info.value)
    assert "\n" not in str(info.value)


def test_every_registered_name_builds_a_workload() -> None:
    for name in available_workloads():
        if name.startswith("torch"):
            try:
                import torch  # noqa: F401
            except ImportError:
                continue
        assert isinstance(get_workload(name), Workload)


@pytest.mark.parametrize("dataset", ["digits", "digits-hard"])
def test_disk_cached_dataset_equals_a_fresh_build_and_damage_is_rebuilt(
        dataset: str, tmp_path, monkeypatch) -> None:
    from ray_cluster.workloads import data as wmod

    monkeypatch.setenv("PSCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wmod, "_DATA_CACHE", {})
    built = wmod.load_dataset(dataset, split_seed=3, copies=2)
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    monkeypatch.setattr(wmod, "_DATA_CACHE", {})  # a new process: reads the file
    read = wmod.load_dataset(dataset, split_seed=3, copies=2)
    for key in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(read, key), getattr(built, key))
        assert getattr(read, key).dtype == getattr(built, key).dtype
    files[0].write_bytes(b"not an npz")
    monkeypatch.setattr(wmod, "_DATA_CACHE", {})
    again = wmod.load_dataset(dataset, split_seed=3, copies=2)
    np.testing.assert_array_equal(again.x_train, built.x_train)
    other = wmod.load_dataset(dataset, split_seed=4, copies=2)  # another key, another file
    assert len(list(tmp_path.glob("*.npz"))) == 2
    assert not np.array_equal(other.y_test, built.y_test)
