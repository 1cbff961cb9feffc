"""The step-time table: seconds per training step, for traces that count steps, not seconds.

Gavel's ``.trace`` files give a job's ``total_steps`` and the Pollux/Sia workload CSVs name an
application whose training runs a fixed number of steps; both need the time of one step to
become run time. Every such format reads this one table (``traces/README.md``, "Step-time
table", lists it with its sources).

* **Gavel job types** (``ResNet-50 (batch size 64)``, ``LM (batch size 10)``, ...): ``step_s``
  = 1 / the isolated (``"null"``) throughput in steps per second on one V100 in Gavel's
  ``scheduler/oracle_throughputs.json`` (github.com/stanford-futuredata/gavel) -- the GPU
  Gavel's trace generator sizes ``total_steps`` against. The trace gives the steps.
* **Pollux applications** (``cifar10``, ``imagenet``, ``bert``, ``yolov3``, ``deepspeech2``):
  from the Pollux artifact (github.com/petuum/adaptdl, ``simulator/``): ``steps`` = the
  ``iteration`` after the application's ``max_epochs`` (``applications.py``) in
  ``traces/<app>/validation-<B>.csv`` at its initial batch size B (the smallest file), and
  ``step_s`` = the one-GPU ``step_time`` at local batch B in ``traces/<app>/placements.csv``.
  DeepSpeech2 has no one-GPU row (only ``scalability.csv`` from 6 GPUs up): its ``step_s`` is 6
  x (``step_time`` - ``sync_time``) of the 6-GPU row at local batch 28 (6 x 28 ~ 160), the
  compute of one 160-utterance step on one GPU.

A name the table lacks (Pollux's ``ncf``: no one-GPU time in the artifact) is renamed by
``--model-map`` if given, else by the format's documented stand-in (:data:`FALLBACK`), and the
rows so read are counted and named in one warning line.
Multi-GPU jobs are assumed to scale linearly (run time = steps x ``step_s`` / GPUs): the
sources measure one GPU.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FALLBACK", "STEP_TIMES", "StepTime", "describe_fallbacks", "lookup"]


@dataclass(frozen=True, kw_only=True)
class StepTime:
    """One job type or application: how long a step takes, and where that comes from."""

    name: str  #: as the trace writes it, lower case
    family: str  #: "gavel" or "pollux": the format family that uses it
    model: str  #: model for the gradient size (a MODEL_CATALOG name, or a name to map)
    step_s: float  #: seconds per step on one GPU
    batch: int  #: global batch size of that step
    steps: int | None  #: steps to finish (Pollux); None = the trace gives them (Gavel)
    source: str  #: file and figure it comes from


_GAVEL = "gavel scheduler/oracle_throughputs.json, v100, isolated ('null') steps/s"
_POLLUX = "adaptdl simulator/traces/{app}: validation-{b}.csv after epoch {e}, placements.csv"


def _gavel(name: str, model: str, batch: int, steps_per_s: float) -> StepTime:
    return StepTime(name=name.lower(), family="gavel", model=model, step_s=1.0 / steps_per_s,
                    batch=batch, steps=None, source=f"{_GAVEL}: {steps_per_s}")


def _pollux(app: str, model: str, batch: int, epochs: int, steps: int,
            step_s: float) -> StepTime:
    return StepTime(name=app, family="pollux", model=model, step_s=step_s, batch=batch,
                    steps=steps, source=_POLLUX.format(app=app, b=batch, e=epochs))


#: Every entry, by lower-case name. Units: seconds per step on one GPU; steps per job.
STEP_TIMES: dict[str, StepTime] = {s.name: s for s in (
    _gavel("ResNet-18 (batch size 16)", "resnet18", 16, 77.31737353972872),
    _gavel("ResNet-18 (batch size 32)", "resnet18", 32, 65.80540708735272),
    _gavel("ResNet-18 (batch size 64)", "resnet18", 64, 48.88418054077558),
    _gavel("ResNet-18 (batch size 128)", "resnet18", 128, 30.287504836881368),
    _gavel("ResNet-18 (batch size 256)", "resnet18", 256, 16.98737109878475),
    _gavel("ResNet-50 (batch size 16)", "resnet50", 16, 17.37438936466519),
    _gavel("ResNet-50 (batch size 32)", "resnet50", 32, 9.920583420101398),
    _gavel("ResNet-50 (batch size 64)", "resnet50", 64, 5.4575999796347645),
    _gavel("ResNet-50 (batch size 128)", "resnet50", 128, 2.8459812117650305),
    _gavel("Transformer (batch size 16)", "transformer", 16, 12.845652425203205),
    _gavel("Transformer (batch size 32)", "transformer", 32, 12.475277737306772),
    _gavel("Transformer (batch size 64)", "transformer", 64, 9.568023720783357),
    _gavel("Transformer (batch size 128)", "transformer", 128, 5.771210833383417),
    _gavel("Transformer (batch size 256)", "transformer", 256, 1.707029875260509),
    _gavel("LM (batch size 5)", "lm", 5, 167.12285773375763),
    _gavel("LM (batch size 10)", "lm", 10, 143.3605131584025),
    _gavel("LM (batch size 20)", "lm", 20, 107.9508715706423),
    _gavel("LM (batch size 40)", "lm", 40, 71.72303675816012),
    _gavel("LM (batch size 80)", "lm", 80, 43.90361072741378),
    _gavel("Recommendation (batch size 512)", "recommendation", 512, 0.33148208257478157),
    _gavel("Recommendation (batch size 1024)", "recommendation", 1024, 0.47997973329981225),
    _gavel("Recommendation (batch size 2048)", "recommendation", 2048, 0.5675318418131742),
    _gavel("Recommendation (batch size 4096)", "recommendation", 4096, 0.6244083613498694),
    _gavel("Recommendation (batch size 8192)", "recommendation", 8192, 0.6023546957515021),
    _gavel("CycleGAN", "cyclegan", 1, 4.918494739402234),
    _gavel("A3C", "a3c", 1, 8.233033211429207),
    _pollux("cifar10", "resnet18", 256, 100, 20377, 0.18708271980285646),
    _pollux("imagenet", "resnet50", 200, 90, 576525, 0.923530888557434),
    _pollux("bert", "bert", 12, 2, 14774, 0.9215156733989716),
    _pollux("yolov3", "yolov3", 8, 50, 103444, 0.3261484205722809),
    _pollux("deepspeech2", "deepspeech2", 160, 80, 4041,
            6 * (0.937611535191536 - 0.13981952619552612)),
)}

#: The stand-in of a name the table lacks, per family: for Gavel (which gives the steps) a
#: step of ResNet-50 at batch 64 (0.18 s, mid-table); for Pollux the smallest application,
#: cifar10 (20,377 x 0.187 s = 3,812 GPU-seconds), since ncf rows ask for one GPU.
FALLBACK: Mapping[str, str] = {"gavel": "resnet-50 (batch size 64)", "pollux": "cifar10"}


def lookup(name: str, family: str, model_map: Mapping[str, str],
           used: Counter[tuple[str, str]]) -> StepTime:
    """The entry of ``name`` (any case) for a format of ``family``.

    ``model_map`` renames first (trace name -> table name, lower case; a rename to a name not
    in the table is left to the model catalog); a name still missing
    takes :data:`FALLBACK`, and ``(name, stand-in)`` is counted in ``used`` (for the one
    warning line of :func:`describe_fallbacks`). O(1).
    """
    key = name.strip().lower()
    if model_map.get(key) in STEP_TIMES:  # a rename to a catalog model is for the catalog
        key = model_map[key]
    entry = STEP_TIMES.get(key)
    if entry is not None:
        return entry
    stand_in = FALLBACK[family]
    used[(key, stand_in)] += 1
    return STEP_TIMES[stand_in]


def describe_fallbacks(used: Counter[tuple[str, str]], what: str = "step-time table") -> str:
    """One line naming every stand-in used, with its row count ("" when none)."""
    if not used:
        return ""
    parts = ", ".join(f"{a} -> {b} ({n} row{'s' if n > 1 else ''})"
                      for (a, b), n in sorted(used.items()))
    n = sum(used.values())
    return (f"names the {what} lacks, in {n} row{'s' if n > 1 else ''}, read as: {parts} "
            "(--model-map NAME=OTHER chooses)")
