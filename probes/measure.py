"""Probe one loaded checkpoint: screen, participation ratio, task metrics and group ablation.

One forward pass over the induction batch yields everything except the ablations (which need one
pass each, without capture). The result is a :class:`~probes.record.MeasurementRecord`.
"""
from __future__ import annotations

import contextlib
import logging
import platform
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers
from tqdm.auto import tqdm

from headwatch.names import duration
from headwatch.validation import InputError, check_probe_settings, check_settings_for_model

from headwatch.probes import ablation as ablation_lib
from headwatch.probes.architectures import HeadGeometry, head_geometry
from headwatch.probes.batch import InductionBatch, induction_batch
from headwatch.probes.capture import NonFiniteError, capture_kernel, capturing, check_finite
from headwatch.probes.copying import copy_reading, effective_half, repeated_batch
from headwatch.probes.intervals import record_intervals
from headwatch.probes.lastlayer import query_position_mlp
from headwatch.probes.participation import participation_ratio
from headwatch.probes.record import (
    PROBE_VERSION, AblationResult, MeasurementRecord, ProbeSettings, RecordIntervals, TaskMetrics, attention_floor_value,
    head_key, negligible_heads,
)
from headwatch.probes.selectivity import SelectivityAccumulator, baseline_positions, induction_circuit
from headwatch.probes.sink import sink_score

log = logging.getLogger("headwatch.probes.measure")

#: A run whose estimate (after its first batch) exceeds this says so, with the estimate, and then
#: logs a line every PROGRESS_SECONDS: to a log file or a pipe too, where the terminal's bar is not drawn.
LONG_RUN_SECONDS = 60.0
PROGRESS_SECONDS = 60.0


class Progress:
    """Examples through every pass of one measurement: the terminal's bar, and for a long run an
    estimate after the first batch plus a line every :data:`PROGRESS_SECONDS` (log handlers)."""

    def __init__(self, total: int, what: str, bar: Any) -> None:
        self.total, self.what, self.bar = total, what, bar
        self.done = 0
        self.started = self.last = time.perf_counter()
        self.long: bool | None = None  # decided after the first batch

    def __call__(self, n: int) -> None:
        self.bar.update(n)
        self.done += n
        now = time.perf_counter()
        left = (now - self.started) / self.done * (self.total - self.done)
        if self.long is None:
            self.long = left > LONG_RUN_SECONDS
            if self.long:
                log.info("%s: %s example passes; the first %s took %.1f s: about %s in all", self.what,
                         f"{self.total:,}", f"{self.done:,}", now - self.started, duration(now - self.started + left))
        elif self.long and now - self.last >= PROGRESS_SECONDS:
            self.last = now
            log.info("%s: %s of %s example passes (%.0f%%), about %s left", self.what, f"{self.done:,}",
                     f"{self.total:,}", 100 * self.done / self.total, duration(left))


class TaskAccumulator:
    """Next-token metrics at the query position against the induction target b."""

    def __init__(self) -> None:
        self.loss = self.top1 = self.top5 = self.logit = 0.0
        self.n = 0

    def update(self, logits: torch.Tensor, target: torch.Tensor) -> None:
        """logits: [B, V] at the query position; target: [B] token ids."""
        logits = logits.float()
        if not torch.isfinite(logits).all():
            raise NonFiniteError("non-finite logits at the query position; the checkpoint or dtype gives garbage "
                                 "here: measure in float32 (--dtype float32)")
        target = target.to(logits.device)
        self.loss += F.cross_entropy(logits, target, reduction="sum").item()
        top5 = logits.topk(min(5, logits.shape[-1]), dim=-1).indices
        self.top1 += (top5[:, 0] == target).sum().item()
        self.top5 += (top5 == target[:, None]).any(-1).sum().item()
        self.logit += logits.gather(1, target[:, None]).sum().item()
        self.n += len(target)

    def metrics(self) -> TaskMetrics:
        n = max(self.n, 1)
        return TaskMetrics(self.loss / n, self.top1 / n, self.top5 / n, self.logit / n,
                           n=self.n, top1_count=int(self.top1))


def _query_logits(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Logits of the last position only: [B, V] (logits_to_keep spares the [B, T, V] tensor)."""
    return model(input_ids=tokens, logits_to_keep=1, use_cache=False).logits[:, -1, :]


def _chunks(n: int, size: int) -> Iterable[tuple[int, int]]:
    return ((i, min(i + size, n)) for i in range(0, n, size))


def task_metrics(
    model: nn.Module, batch: InductionBatch, batch_size: int, device: torch.device,
    heads_to_ablate: Iterable[str] = (), progress: Callable | None = None,
) -> TaskMetrics:
    """Task metrics over the batch with ``heads_to_ablate`` zeroed (none: the baseline)."""
    acc = TaskAccumulator()
    with torch.inference_mode(), ablation_lib.ablated(model, heads_to_ablate):
        for start, stop in _chunks(len(batch), batch_size):
            part = batch.slice(start, stop)
            acc.update(_query_logits(model, part.tokens.to(device)), part.b)
            if progress:
                progress(stop - start)
    return acc.metrics()


def ablation_metrics(
    model: nn.Module, batch: InductionBatch, batch_size: int, device: torch.device,
    groups: dict[str, list[str]], progress: Callable | None = None, kept: ablation_lib.KeptPrefix | None = None,
) -> dict[str, TaskMetrics]:
    """Task metrics over the batch with each group's heads zeroed, one group at a time: what
    :func:`task_metrics` gives per group, batch by batch. The layers below the lowest ablated layer
    run once per batch for all groups (probes/ablation.py: ``shared_prefix``, ``replaying_prefix``),
    or not at all below the layer the screen ``kept`` (the same batches), so every number is the same."""
    start = ablation_lib.lowest_layer(groups.values())
    accumulators = {name: TaskAccumulator() for name in groups}
    with torch.inference_mode():
        for index, (lo, hi) in enumerate(_chunks(len(batch), batch_size)):
            part = batch.slice(lo, hi)
            tokens = part.tokens.to(device)
            shared = ablation_lib.shared_prefix(model, start, lambda: _query_logits(model, tokens), kept, index)
            for name, heads in groups.items():
                with ablation_lib.ablated(model, heads), ablation_lib.replaying_prefix(model, start, shared):
                    accumulators[name].update(_query_logits(model, tokens), part.b)
                if progress:
                    progress(hi - lo)
    return {name: acc.metrics() for name, acc in accumulators.items()}


def _model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _dtype_name(model: nn.Module) -> str:
    return str(next(model.parameters()).dtype).removeprefix("torch.")


@dataclass
class ScreenResult:
    """What the single captured pass yields (per-example quantities stay inside ``selectivity``)."""

    table: dict[str, dict[str, float]]
    pr: dict[str, float]
    task: TaskMetrics
    n_valid: int
    #: The accumulator, holding per-example attention when intervals were asked for.
    selectivity: SelectivityAccumulator
    #: [n_sink, L, H] attention to position 0 averaged over queries 1..T-1, or None.
    first_position: torch.Tensor | None
    #: One decoder layer's output in every batch, for the ablation passes (probes/ablation.py), or None.
    kept: ablation_lib.KeptPrefix | None = None


def screen(
    model: nn.Module, batch: InductionBatch, settings: ProbeSettings, geometry: HeadGeometry,
    progress: Callable | None = None,
) -> ScreenResult:
    """The single captured pass: selectivity table, PR per head, task metrics, n valid, and (on the
    first ``settings.sink_examples`` examples) each query's attention to position 0."""
    device = _model_device(model)
    T = batch.tokens.shape[1]
    selectivity = SelectivityAccumulator(
        geometry.n_layers, geometry.n_heads, T,
        baseline_positions(T, settings.baseline_positions, settings.baseline_seed),
        keep_examples=settings.n_bootstrap > 0,
    )
    task = TaskAccumulator()
    n_pr = settings.n_pr  # <= len(batch): measure() checked it
    n_sink = min(settings.sink_examples, len(batch))
    # Head outputs of the first n_pr examples: [L, H, n_pr, D], filled batch by batch.
    pr_outputs = torch.empty(geometry.n_layers, geometry.n_heads, n_pr, geometry.d_head, dtype=torch.float32)
    first_position = torch.empty(n_sink, geometry.n_layers, geometry.n_heads, dtype=torch.float32) if n_sink else None
    keeper = ablation_lib.PrefixKeeper(model, len(batch), settings.batch_size, T) if settings.ablation else None
    with torch.inference_mode(), capturing(model) as recorder, keeper or contextlib.nullcontext():
        for start, stop in _chunks(len(batch), settings.batch_size):
            part = batch.slice(start, stop)
            recorder.want_first_position = start < n_sink
            logits = _query_logits(model, part.tokens.to(device))
            rows, outputs = recorder.stacked(geometry.n_layers)
            check_finite(rows, outputs, f"examples {start}-{stop}")
            selectivity.update(rows, part.ab, part.valid)
            if keeper and start == 0:
                first = {h: sel["induction"] for h, sel in selectivity.selectivity().items()}
                keeper.choose(ablation_lib.guessed_layer(first, settings.induction_threshold))
            task.update(logits, part.b)
            if start < n_pr:
                take = min(stop, n_pr) - start
                pr_outputs[:, :, start : start + take] = outputs[:take].permute(1, 2, 0, 3).float().cpu()
            if start < n_sink:
                take = min(stop, n_sink) - start
                first_position[start : start + take] = recorder.first_position(geometry.n_layers)[:take].float().cpu()
            if progress:
                progress(stop - start)
    pr_values = participation_ratio(pr_outputs)  # [L, H]
    pr = {head_key(l, h): float(pr_values[l, h]) for l in range(geometry.n_layers) for h in range(geometry.n_heads)}
    return ScreenResult(selectivity.selectivity(), pr, task.metrics(), selectivity.n_valid, selectivity, first_position,
                        keeper.kept if keeper else None)


def intervals_of(screened: ScreenResult, task: TaskMetrics, ablations: list[AblationResult],
                 settings: ProbeSettings) -> RecordIntervals:
    """The record's intervals (probes/intervals.py) from the screen's per-example attention."""
    if settings.n_bootstrap > 0:
        values, baseline, valid = screened.selectivity.examples()
    else:  # exact top-1 intervals only
        values, baseline, valid = np.empty((0, 0, 0, 0)), np.empty((0, 0, 0)), np.empty(0, dtype=bool)
    return record_intervals(
        values, baseline, valid, task=task, ablations={a.name: a.metrics for a in ablations},
        n_resamples=settings.n_bootstrap, seed=settings.bootstrap_seed, level=settings.interval_level,
        induction_threshold=settings.induction_threshold, bos_threshold=settings.bos_threshold,
        attention_floor=attention_floor_value(settings.seq_len, settings.attention_floor),
    )


def non_finite_parameters(model: nn.Module) -> list[str]:
    """Names of the parameters and buffers holding NaN or inf (floating ones), in model order."""
    return [name for name, t in [*model.named_parameters(), *model.named_buffers()]
            if t.is_floating_point() and not bool(torch.isfinite(t).all())]


def _with_weights_named(e: NonFiniteError, model: nn.Module, what: str) -> NonFiniteError:
    """Non-finite activations: if the weights themselves hold NaN or inf, say which (another dtype
    will not help: the checkpoint is damaged or its training diverged)."""
    bad = non_finite_parameters(model)
    if not bad:
        return e
    return NonFiniteError(
        f"{what}: its weights hold NaN or inf in {len(bad)} tensor(s): {', '.join(bad[:5])}"
        + (" ..." if len(bad) > 5 else "") + f" (so {str(e).split(';')[0]}). The checkpoint is damaged or its "
        "training diverged: measure another revision, or save or download this one again")


def measure(
    model: nn.Module,
    settings: ProbeSettings = ProbeSettings(),
    *,
    model_name: str,
    revision: str,
    tokens_seen: float | None = None,
    progress: bool = True,
    batch: InductionBatch | None = None,
) -> MeasurementRecord:
    """Run every probe on ``model`` (already on its device, in eval mode or not).

    The induction batch is built from ``settings`` unless given. Ablations (three more passes)
    run when ``settings.ablation`` is set and the induction circuit (heads with negligible induction
    attention left out, as the judge leaves them out) is not empty.
    """
    started = time.perf_counter()
    # The callers check these before loading the model; checked again here, where the numbers are
    # made, so that no caller can measure with settings the record would misstate.
    check_settings_for_model(settings, model.config, f"{model_name}@{revision}")
    check_probe_settings(asdict(settings))
    model.eval()
    geometry = head_geometry(model)
    if batch is None:
        batch = induction_batch(
            settings.n_examples, settings.seq_len, settings.vocab_lo, settings.vocab_hi, settings.seed
        )
    elif len(batch) < settings.n_pr:
        raise InputError(f"n_pr: got {settings.n_pr}, more than the {len(batch)} examples of the given batch")
    if not bool(batch.valid.any()):
        raise InputError(
            f"none of the {len(batch)} examples is valid (b occurs once before the query) with token ids "
            f"[{settings.vocab_lo}, {settings.vocab_hi}) at length {settings.seq_len}: every induction selectivity "
            "would be 0; widen the token range")
    circuit_passes = 3 if settings.ablation else 0
    # The copyable-position reading: a baseline and the same groups on repeated sequences (their
    # passes count as sequences, each about as long as an example).
    copy_passes = (1 + circuit_passes) * settings.copy_sequences if settings.ablation else 0
    total = len(batch) * (1 + circuit_passes) + copy_passes
    bar = tqdm(
        total=total, desc=f"{model_name}@{revision}", unit="ex",
        disable=not progress or not sys.stderr.isatty(), leave=False,  # no cursor escapes in logs
    )
    progress_of = Progress(total, f"{model_name}@{revision}", bar)
    try:
        try:
            with query_position_mlp(model):
                screened = screen(model, batch, settings, geometry, progress_of)
        except NonFiniteError as e:
            raise _with_weights_named(e, model, f"{model_name}@{revision}") from None
        table, pr, task, n_valid = screened.table, screened.pr, screened.task, screened.n_valid
        attention = screened.selectivity.attention_table()
        ablations: list[AblationResult] = []
        layers_from_screen = 0  # decoder layers the ablation passes took from the screen's output
        copies = None
        # the circuit the judge counts: heads whose induction attention is negligible are not in it
        negligible = negligible_heads(attention, "induction", settings.seq_len, settings.attention_floor)
        circuit = sorted(induction_circuit(table, settings.induction_threshold, negligible))
        if settings.ablation and circuit:
            device = _model_device(model)
            groups = {
                "induction_circuit": circuit,
                "matched_random": ablation_lib.matched_random_heads(
                    circuit, geometry.n_heads, settings.ablation_seed, n_layers=geometry.n_layers),
                "circuit_layers": ablation_lib.layer_heads(circuit, geometry.n_heads),
            }
            with query_position_mlp(model), capture_kernel(model):
                metrics = ablation_metrics(model, batch, settings.batch_size, device, groups, progress_of, screened.kept)
            ablations.extend(AblationResult(name, tuple(heads), metrics[name]) for name, heads in groups.items())
            half = effective_half(settings.copy_half, settings.vocab_lo, settings.vocab_hi,
                                  getattr(model.config, "max_position_embeddings", None))
            if settings.copy_sequences > 0 and half >= 2:
                repeated = repeated_batch(settings.copy_sequences, half, settings.vocab_lo, settings.vocab_hi,
                                          settings.copy_seed)
                with capture_kernel(model):
                    copies = copy_reading(model, repeated, groups, device, settings.copy_seed, progress_of)
            kept = screened.kept
            if kept and kept.same and kept.layer <= ablation_lib.lowest_layer(groups.values()):
                layers_from_screen = kept.layer
    finally:
        bar.close()
    intervals_started = time.perf_counter()
    intervals = intervals_of(screened, task, ablations, settings)
    sink = sink_score(screened.first_position) if screened.first_position is not None else None
    del screened  # per-example quantities never leave measure(): the record keeps bounds only
    intervals_seconds = time.perf_counter() - intervals_started
    return MeasurementRecord(
        model=model_name,
        revision=revision,
        tokens_seen=tokens_seen,
        n_layers=geometry.n_layers,
        n_heads=geometry.n_heads,
        d_head=geometry.d_head,
        all_head_selectivity=table,
        pr=pr,
        task=task,
        ablations=ablations,
        settings=settings,
        n_examples_valid=n_valid,
        provenance={
            "probe_version": PROBE_VERSION,
            "model_type": model.config.model_type,
            "device": str(_model_device(model)),
            "dtype": _dtype_name(model),
            "seconds": round(time.perf_counter() - started, 3),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "ablation_note": None if circuit or not settings.ablation else "no head reached the induction threshold: nothing to ablate",
            "intervals_seconds": round(intervals_seconds, 3),
            "ablation_layers_from_screen": layers_from_screen,
        },
        intervals=intervals,
        sink=sink,
        copy_reading=copies,
        attention=attention,
    )
