"""The PyTorch workloads worth a GPU (``torch-cnn``, ``torch-lm``): real gradients, learning,
the standard-library corpus read as documented, and the same first steps on every device."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from finite_differences import central_differences

from ray_cluster.ps.optim import MomentumSGD
from ray_cluster.workloads.builtin import HPARAMS, Workload, get_workload
from ray_cluster.workloads.corpus import HELD_OUT_EVERY, load_corpus, stdlib_files

torch = pytest.importorskip("torch")

TINY = {
    "torch-cnn": {"channels": 3, "hidden": 12},
    "torch-lm": {"d_model": 16, "layers": 2, "heads": 2, "context": 16, "corpus_mb": 0.5},
}
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True, scope="module")
def _one_thread():  # tiny models on a shared machine: threads only contend
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _make(name: str, **extra: Any) -> Any:
    return get_workload(name, {**TINY[name], **extra})


def _batch(wl: Any, n: int, seed: int) -> Any:
    return next(wl.batches(wl.partition(1, 0), n, np.random.default_rng(seed)))


def _steps(wl: Workload, steps: int, seed: int, batch: int = 16) -> tuple[np.ndarray, list[float]]:
    params = wl.init_params(seed)
    opt = MomentumSGD(lr=0.05, momentum=0.9)
    state = opt.init(params.size)
    losses = []
    for b in islice(wl.batches(wl.partition(1, 0), batch, np.random.default_rng(seed)), steps):
        loss, grad = wl.gradient(params, b)
        losses.append(loss)
        params, state = opt.update(params, grad, state)
    return params, losses


# -- gradients ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(TINY))
@pytest.mark.parametrize("seed", [0, 1])
def test_gradient_matches_central_finite_differences(name: str, seed: int) -> None:
    wl = _make(name, device="cpu")
    rng = np.random.default_rng(seed)
    params = wl.init_params(seed).astype(np.float64) + rng.normal(0, 0.05, wl.n_params)
    batch = _batch(wl, 4, seed)
    loss, grad = wl.gradient_float64(params, batch)
    assert loss == pytest.approx(wl.loss(params, batch), rel=1e-12)
    idx = rng.choice(wl.n_params, 30, replace=False)
    fd = central_differences(lambda p: wl.loss(p, batch), params, idx)
    assert grad[idx] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    loss32, grad32 = wl.gradient(params.astype(np.float32), batch)  # what workers train with
    assert grad32.dtype == np.float32 and grad32.shape == (wl.n_params,)
    assert loss32 == pytest.approx(loss, rel=1e-4)
    np.testing.assert_allclose(grad32, grad, rtol=1e-3, atol=1e-5 * np.abs(grad).max())


@pytest.mark.parametrize("name", sorted(TINY))
def test_each_gradient_is_a_vector_of_its_own(name: str) -> None:
    wl = _make(name, device="cpu")
    p = wl.init_params(0)
    g1 = wl.gradient(p, _batch(wl, 4, 1))[1]
    kept = g1.copy()
    g2 = wl.gradient(p, _batch(wl, 4, 2))[1]
    assert not np.shares_memory(g1, g2)
    np.testing.assert_array_equal(g1, kept)


def test_torch_cnn_is_the_network_its_docstring_draws() -> None:
    wl = _make("torch-cnn", device="cpu")
    c, h = wl.channels, wl.hidden
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, c, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(c, 2 * c, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(2 * c, 2 * c, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(32 * c, h), torch.nn.ReLU(), torch.nn.Linear(h, 10)).double()
    p = wl.init_params(4).astype(np.float64)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(p.copy()), net.parameters())
    assert sum(t.numel() for t in net.parameters()) == wl.n_params
    batch = _batch(wl, 6, 0)
    x = torch.from_numpy(batch.x).reshape(-1, 1, 8, 8)
    loss = torch.nn.functional.cross_entropy(net(x), torch.from_numpy(batch.y))
    loss.backward()
    ref = torch.cat([t.grad.reshape(-1) for t in net.parameters()]).numpy()
    got_loss, got = wl.gradient_float64(p, batch)
    assert got_loss == pytest.approx(float(loss.detach()), rel=1e-12)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-14)


# -- learning ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "steps"), [("torch-cnn", 150), ("torch-lm", 120)])
@pytest.mark.parametrize("seed", [0, 1])
def test_momentum_sgd_lowers_held_out_loss_and_raises_accuracy(name: str, steps: int,
                                                               seed: int) -> None:
    wl = _make(name, device="cpu")
    before = wl.evaluate(wl.init_params(seed))
    params, losses = _steps(wl, steps, seed)
    after = wl.evaluate(params)
    assert np.mean(losses[-20:]) < np.mean(losses[:20]) - 0.5
    assert after["loss"] < before["loss"] - 0.5
    assert after["accuracy"] > before["accuracy"] + 0.1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(TINY))
def test_first_steps_agree_between_cpu_and_the_device(name: str, device: str) -> None:
    """On a machine with CUDA: CUDA against CPU. Everywhere: the device path against itself
    (and the Ray worker on a fake GPU in tests/test_gpu_workers.py)."""
    ref, ref_losses = _steps(_make(name, device="cpu"), 5, 3)
    got, losses = _steps(_make(name, device=device), 5, 3)
    # CUDA runs float32 kernels in another order (cuDNN's convolutions in TF32 by default)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4 if device == "cpu" else 3e-3)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-5 if device == "cpu" else 1e-4)


# -- size, pickling, schema ----------------------------------------------------------------------
@pytest.mark.parametrize(("name", "hparams", "mb"), [
    ("torch-cnn", {}, (4, 6)), ("torch-cnn", {"channels": 256, "hidden": 2048}, (75, 90)),
    ("torch-lm", {}, (1.5, 2)), ("torch-lm", {"d_model": 512, "layers": 8, "context": 128},
                                 (95, 110))])
def test_hparams_size_the_models_from_a_few_mb_to_about_100_mb(name, hparams, mb) -> None:
    wl = get_workload(name, {**hparams, "device": "cpu"})
    assert mb[0] <= wl.n_params * 4 / 1e6 <= mb[1]


@pytest.mark.parametrize("name", sorted(TINY))
def test_new_workloads_pickle_as_hyperparameters_only(name: str) -> None:
    wl = _make(name)
    _ = wl.evaluate(wl.init_params(0))  # data loaded in this process
    blob = pickle.dumps(wl)
    assert len(blob) < 1000 and pickle.loads(blob) == wl


@pytest.mark.parametrize("name", sorted(TINY))
def test_hparams_schema_names_every_field_of_the_workload(name: str) -> None:
    assert set(HPARAMS[name]) == {f.name for f in dataclasses.fields(_make(name))}


@pytest.mark.parametrize(("name", "hparams", "match"), [
    ("torch-lm", {"d_model": 30, "heads": 4}, "hparams.heads"),
    ("torch-lm", {"corpus_mb": 0.1}, "hparams.corpus_mb"),
    ("torch-lm", {"device": "tpu"}, "hparams.device"),
    ("torch-cnn", {"channels": 0}, "hparams.channels"),
    ("torch-cnn", {"hidden": 4096}, "hparams.hidden"),
])
def test_bad_hyperparameters_are_refused_in_one_line(name: str, hparams: dict,
                                                     match: str) -> None:
    from psched.core.errors import InputError

    with pytest.raises(InputError) as err:
        get_workload(name, hparams)
    assert match in str(err.value) and "\n" not in str(err.value)


# -- the corpus ------------------------------------------------------------------------------------
def test_corpus_is_the_stdlib_read_in_the_documented_order_with_its_hash() -> None:
    """Re-read by the rules of ray_cluster.workloads.corpus, written out here once more."""
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py")
                   if not {"site-packages", "dist-packages", "__pycache__"}
                   & set(p.relative_to(root).parts))
    assert stdlib_files() == names
    corpus = load_corpus(0.5)
    texts, total = [], 0
    for i, name in enumerate(names):
        text = (root / name).read_bytes() + b"\n"
        if i and total + len(text) > 500_000:
            break
        total += len(text)
        texts.append(text)
    held = b"".join(t for i, t in enumerate(texts) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1)
    train = b"".join(t for i, t in enumerate(texts) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1)
    assert corpus.files == len(texts) and corpus.held_out.tobytes() == held
    assert corpus.train.tobytes() == train
    assert corpus.sha256 == hashlib.sha256(train + held).hexdigest()
    assert corpus.sha256[:16] in corpus.describe()


def test_a_larger_corpus_extends_a_smaller_one(tmp_path: Path) -> None:
    for i, size in enumerate([300, 500, 200, 400] * 6):
        sub = tmp_path / ("pkg" if i % 3 else "") / f"m{i:02d}.py"
        sub.parent.mkdir(exist_ok=True)
        sub.write_bytes(bytes([97 + i % 26]) * size)
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "skip.py").write_text("never read")
    small, big = load_corpus(0.003, root=tmp_path), load_corpus(0.01, root=tmp_path)
    assert small.files < big.files == 24
    assert big.train.tobytes().startswith(small.train.tobytes()[:1000])
    assert b"never read" not in big.train.tobytes() + big.held_out.tobytes()
    assert len(big.train) + len(big.held_out) == sum([300, 500, 200, 400] * 6) + 24
