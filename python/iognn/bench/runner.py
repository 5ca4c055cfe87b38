"""Runs a configuration: every graph x workload x implementation, one result row each.

Per graph: load it once onto the device (``PreparedGraph``, which also holds its iognn Graphs),
then for every workload generate the rotated input sets and, in layer mode, the PyG module; then
measure every implementation on the same inputs and the same parameters. Failures are results:
an implementation whose module is not installed (``ModuleNotFoundError``: torch_sparse, say) is
'unavailable', ``NotImplementedError`` (an iognn op without a kernel
on this device) 'not_implemented', ``torch.OutOfMemoryError`` 'oom', anything else 'error' with
its message. ``torch.cuda.empty_cache()`` runs between implementations.

Correctness: every implementation's output is compared with a reference: in fp32 the ``pyg``
implementation run in fp64 on the same inputs and parameters (PyG's own fp32 row is checked against
it too: its rel_error is PyG's own rounding, for information, and its check says 'ref'; so
that rounding is not charged to the rows compared with it); in fp64, or in fp32 when the fp64 run
does not fit, the ``pyg`` run itself (that row says 'ref'); in mode
fwdbwd the gradients of the inputs are compared too. In fp16/bf16 the reference is the ``pyg``
implementation run in fp32 on the same rounded inputs and parameters (outputs only). The relative
error ``||y - ref|| / ||ref||`` (the largest over the tensors compared) must be within the dtype's
tolerance or, against the fp64 run, within twice PyG's own fp32 error: 'ok' or 'FAIL'.
"""
from __future__ import annotations

import copy
import gc
import math
import platform
import sys
import time
import warnings
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .cases import Workload
from .floor import floor_bytes, measure_bandwidth
from .graphs import is_synthetic, load_graph
from .prepared import PreparedGraph
from .suites import BenchConfig
from .timing import Step, measure

REFERENCE = "pyg"
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}
DTYPE_NAMES = {torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16",
               torch.bfloat16: "bf16"}
MAX_INPUT_SETS = 4


class Reference:
    """Output and input gradients of the reference run (fp32 or better)."""

    def __init__(self, out: Tensor, grads: Sequence[Optional[Tensor]]):
        self.out = out.detach().float()
        self.grads = [None if g is None else g.detach().float() for g in grads]

    def error(self, out: Tensor, grads: Sequence[Optional[Tensor]]) -> float:
        pairs = [(out, self.out)] + [(g, r) for g, r in zip(grads, self.grads) if r is not None]
        worst = 0.0
        for value, ref in pairs:
            if value is None or value.shape != ref.shape:
                return math.inf
            scale = torch.linalg.vector_norm(ref).item()
            diff = torch.linalg.vector_norm(value.detach().float() - ref).item()
            worst = max(worst, diff / scale if scale > 0 else diff)
        return worst


def classify(exc: BaseException) -> Tuple[str, str]:
    """(status, one-line message) of an exception raised by an implementation."""
    if isinstance(exc, ModuleNotFoundError):  # an optional implementation not installed
        status = "unavailable"
    elif isinstance(exc, torch.OutOfMemoryError):
        status = "oom"
    elif isinstance(exc, NotImplementedError):
        status = "not_implemented"
    else:
        status = "error"
    lines = str(exc).strip().splitlines()
    message = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return status, message[:300]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA device")
    return device


def free_memory(device: torch.device, collect: bool = False) -> None:
    """Returns cached GPU memory to the driver; ``collect`` first breaks reference cycles (after an
    out-of-memory error or a failure, whose traceback may have held tensors)."""
    if device.type == "cuda":
        if collect:
            gc.collect()
        torch.cuda.empty_cache()


class Runner:
    def __init__(self, cfg: BenchConfig, progress: bool = True):
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.backward = cfg.mode == "fwdbwd"
        self.progress = progress

    # ---- top level ----------------------------------------------------------------------------
    def run(self, command: str = "", checkpoint: Optional[Callable[[dict], None]] = None) -> dict:
        """The report (see docs/benchmarks.md); ``checkpoint(report)`` is called after each graph
        with the results so far, so that a run cut short still leaves them."""
        threads = torch.get_num_threads()
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        try:
            with warnings.catch_warnings():  # PyG's advice, repeated for every graph
                warnings.filterwarnings("ignore", message=".*accelerated via the 'torch-scatter'")
                return self._run(command, checkpoint)
        finally:
            torch.set_num_threads(threads)

    def _run(self, command: str, checkpoint) -> dict:
        from .._progress import progress_bar
        started = time.perf_counter()
        bandwidth = measure_bandwidth(self.device)
        workloads = self.cfg.workloads()
        total = len(self.cfg.graphs) * sum(len(w.case.impls(w)) for w in workloads)
        date = datetime.now(timezone.utc).isoformat(timespec="seconds")
        report = {"schema_version": 1, "date": date, "command": command, "suite": self.cfg.suite,
                  "config": self.cfg.as_json(), "device": self._device_info(bandwidth),
                  "versions": versions(),
                  "graphs": [], "skipped_graphs": [], "results": []}
        with progress_bar(total=total, desc="iognn bench", unit="case",
                          enabled=self.progress) as bar:
            for spec in self.cfg.graphs:
                bar.set_description(f"loading {spec}")
                graph = self._load(spec, report)
                if graph is None:
                    bar.update(sum(len(w.case.impls(w)) for w in workloads))
                    continue
                graph_start = time.perf_counter()
                for w in workloads:
                    report["results"].extend(self._run_workload(graph, w, bandwidth, bar))
                del graph
                free_memory(self.device)
                report["elapsed_s"] = round(time.perf_counter() - started, 2)
                message = (f"{spec}: measured in {time.perf_counter() - graph_start:.1f} s "
                           f"({report['elapsed_s']:.0f} s so far)")
                bar.write(message, file=sys.stderr)
                if checkpoint is not None:
                    checkpoint(report)
        report["elapsed_s"] = round(time.perf_counter() - started, 2)
        return report

    def _device_info(self, bandwidth: float) -> dict:
        info = {"type": self.device.type, "bandwidth_gb_s": round(bandwidth / 1e9, 2)}
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            info.update(name=props.name, memory_gib=round(props.total_memory / 2**30, 1),
                        multiprocessors=props.multi_processor_count,
                        l2_cache_bytes=getattr(props, "L2_cache_size", None))
        else:
            info.update(name=platform.processor() or platform.machine(),
                        threads=torch.get_num_threads())
        return info

    def _load(self, spec: str, report: dict) -> Optional[PreparedGraph]:
        start = time.perf_counter()
        try:
            edge_index, num_nodes = load_graph(spec, seed=self.cfg.seed, device=self.device,
                                               data_dir=self.cfg.data_dir)
            graph = PreparedGraph(spec, edge_index, num_nodes, self.device)
        except (FileNotFoundError, ValueError, torch.OutOfMemoryError) as exc:
            # an absent dataset, a generator argument out of range, a graph too large: skipped
            report["skipped_graphs"].append({"spec": spec, "reason": classify(exc)[1]})
            free_memory(self.device, collect=True)
            return None
        synthetic = is_synthetic(spec)
        report["graphs"].append({"spec": spec, "source": "synthetic" if synthetic else "dataset",
                                 "seed": self.cfg.seed if synthetic else None,
                                 "load_s": round(time.perf_counter() - start, 3), **graph.stats})
        return graph

    # ---- one workload -------------------------------------------------------------------------
    def _run_workload(self, g: PreparedGraph, w: Workload, bandwidth: float, bar) -> List[dict]:
        impls = w.case.impls(w)
        fwd_bytes, bwd_bytes = floor_bytes(w, g)
        rows = [self._row(g, w, name, fwd_bytes, bwd_bytes) for name in impls]
        try:
            module = self._module(w) if w.level == "layer" else None
            input_sets = self._input_sets(g, w)
        except Exception as exc:  # e.g. no memory left for the inputs: every row shares the fate
            status, message = classify(exc)
            for row in rows:
                row.update(status=status, message=message)
            bar.update(len(rows))
            free_memory(self.device, collect=True)
            return rows
        grads: Dict[torch.Size, Tensor] = {}
        reference: Optional[Reference] = None
        if w.dtype != torch.float64:  # fp32 against fp64, fp16 / bf16 against fp32
            reference = self._pyg_reference(g, w, module, input_sets[0], grads,
                                            torch.float64 if w.dtype == torch.float32
                                            else torch.float32)
        for row, (name, build) in zip(rows, impls.items()):
            bar.set_description(f"{g.spec} {w.label} {w.level} {row['dtype']} {name}")
            made = self._measure(g, w, build, module, input_sets, grads, reference, row)
            if name == REFERENCE and reference is None and made is not None:
                reference = made
                row["check"] = "ref"
            elif name == REFERENCE and w.dtype == torch.float32 and row["rel_error"] is not None:
                # Against fp64, an implementation may be as far off as PyG's own fp32 result
                # (twice that, for rounding in another order): an ill-conditioned op (std's
                # E[x^2] - E[x]^2, say) is then not a failure of a faithful implementation.
                for later in rows:
                    later["tolerance"] = max(later["tolerance"], 2 * row["rel_error"])
            bar.update(1)
            free_memory(self.device, collect=row["status"] in ("oom", "error"))
        self._relative_figures(rows, bandwidth)
        return rows

    def _row(self, g: PreparedGraph, w: Workload, impl: str, fwd_bytes: int, bwd_bytes: int) -> dict:
        return {"graph": g.spec, "op": w.op, "label": w.label, "family": w.case.family,
                "level": w.level, "dtype": DTYPE_NAMES[w.dtype], "impl": impl, "feat": w.feat,
                "heads": w.heads, "head_dim": w.head_dim, "status": "ok", "message": None,
                "fwd_ms": None, "bwd_ms": None, "fwdbwd_ms": None, "iterations": 0,
                "peak_mib": None, "floor_fwd_bytes": fwd_bytes,
                "floor_bwd_bytes": bwd_bytes if self.backward else None,
                "floor_ms": None, "floor_fraction": None, "speedup": None, "speedup_fwd": None,
                "speedup_bwd": None, "speedup_fwdbwd": None, "memory_ratio": None,
                "check": None, "rel_error": None, "tolerance": TOLERANCE[w.dtype]}

    def _module(self, w: Workload) -> torch.nn.Module:
        """The PyG layer, initialised from the seed on the CPU (device-independent), in fp32."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.seed)
            module = w.case.make_layer("torch_geometric.nn", w)
        return module.to(self.device)

    def _input_sets(self, g: PreparedGraph, w: Workload) -> List[Tuple[Tensor, ...]]:
        """Input sets in the workload's dtype (leaves; requiring grad in fwdbwd mode), as many as
        needed to exceed twice the GPU's L2 cache, between 2 and MAX_INPUT_SETS."""
        sets: List[Tuple[Tensor, ...]] = []
        count = 2
        for k in range(MAX_INPUT_SETS):
            gen = torch.Generator(device=self.device)
            gen.manual_seed(self.cfg.seed * 1_000_003 + k)
            if w.level == "layer":
                fp32 = (torch.randn((g.num_nodes, w.feat), generator=gen, device=self.device),)
            else:
                fp32 = w.case.op_inputs(w, g, gen)
            sets.append(tuple(t.to(w.dtype).requires_grad_(self.backward) for t in fp32))
            if k == 0:
                set_bytes = sum(t.numel() * t.element_size() for t in sets[0])
                count = self._input_set_count(set_bytes)
            if len(sets) == count:
                return sets
        return sets

    def _input_set_count(self, set_bytes: int) -> int:
        if self.device.type != "cuda":
            return 2
        l2 = getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0) or 0
        return max(2, min(MAX_INPUT_SETS, math.ceil(2 * l2 / max(set_bytes, 1))))

    def _grad(self, grads: Dict[torch.Size, Tensor], shape: torch.Size, dtype: torch.dtype) -> Tensor:
        """The fixed output gradient of the workload (same for every implementation)."""
        if shape not in grads:
            gen = torch.Generator(device=self.device)
            gen.manual_seed(self.cfg.seed + 7919)
            grads[shape] = torch.randn(shape, generator=gen, device=self.device).to(dtype)
        return grads[shape]

    def _pyg_reference(self, g, w, module, inputs, grads, dtype) -> Optional[Reference]:
        """The pyg implementation run in ``dtype`` on the workload's inputs and parameters (as
        rounded to the workload's dtype), or None when it cannot run (e.g. it does not fit).

        fp64, for fp32 workloads: the output and, in mode fwdbwd, the input gradients for the same
        output gradient. fp32, for fp16/bf16 workloads: the output only (the rounded inputs tie
        often, and min/max gradients legitimately differ on ties: PyG splits them, arg-index
        kernels give them to one element)."""
        with_grads = self.backward and dtype == torch.float64
        w_ref = replace(w, dtype=dtype)
        try:
            module_ref = None if module is None else copy.deepcopy(module).to(w.dtype).to(dtype)
            fn = w.case.impls(w_ref)[REFERENCE](g, w_ref, module_ref)
            x = [t.detach().to(dtype).requires_grad_(with_grads) for t in inputs]
            with torch.set_grad_enabled(with_grads):
                out = fn(*x)
            if with_grads:
                out.backward(self._grad(grads, out.shape, w.dtype).to(dtype))
            return Reference(out, [t.grad for t in x] if with_grads else [])
        except Exception:
            free_memory(self.device, collect=True)
            return None

    def _measure(self, g, w, build, module, input_sets, grads, reference, row) -> Optional[Reference]:
        """Fills `row`; returns this run's outputs as a Reference (for the pyg row)."""
        made = None
        try:
            layer = None if module is None else copy.deepcopy(module).to(w.dtype)
            fn = build(g, w, layer)
            params = [] if layer is None else list(getattr(fn, "module", layer).parameters())
            # correctness run (the first warm-up step) on input set 0
            with torch.set_grad_enabled(self.backward):
                out = fn(*input_sets[0])
            grad = self._grad(grads, out.shape, w.dtype) if self.backward else None
            if grad is not None:
                out.backward(grad)
            inputs_grads = [t.grad for t in input_sets[0]]
            if reference is not None:
                err = reference.error(out, inputs_grads)
                row["rel_error"] = err
                # PyG's own row reports its error against the fp64 run and is not judged by it
                row["check"] = ("ref" if row["impl"] == REFERENCE and w.dtype == torch.float32
                                else "ok" if err <= row["tolerance"] else "FAIL")
            elif row["impl"] == REFERENCE and w.dtype in (torch.float32, torch.float64):
                made = Reference(out, inputs_grads)
            del out, inputs_grads
            step = Step(fn, input_sets, grad, params)
            step.reset()
            m = measure(step, self.device, self.cfg.warmup - 1, self.cfg.repeats, self.cfg.budget_s)
            row.update(fwd_ms=m.fwd_ms, bwd_ms=m.bwd_ms, fwdbwd_ms=m.fwdbwd_ms,
                       iterations=m.iterations, peak_mib=m.peak_mib)
        except Exception as exc:  # a reference made before the failure stays valid
            row["status"], row["message"] = classify(exc)
        finally:
            for inputs in input_sets:
                for t in inputs:
                    t.grad = None
        return made

    def _relative_figures(self, rows: List[dict], bandwidth: float) -> None:
        """Speed-ups and memory ratios against the pyg row; floor time and fraction reached."""
        main = "fwdbwd_ms" if self.backward else "fwd_ms"
        ref = next((r for r in rows if r["impl"] == REFERENCE and r["status"] == "ok"), None)
        for row in rows:
            floor = row["floor_fwd_bytes"] + (row["floor_bwd_bytes"] or 0)
            row["floor_ms"] = floor / bandwidth * 1e3
            if row["status"] != "ok":
                continue
            row["floor_fraction"] = row["floor_ms"] / row[main] if row[main] else None
            if ref is None:
                continue
            for key in ("fwd", "bwd", "fwdbwd"):
                mine, theirs = row[f"{key}_ms"], ref[f"{key}_ms"]
                row[f"speedup_{key}"] = theirs / mine if mine and theirs else None
            row["speedup"] = row[f"speedup_{main[:-3]}"]
            if row["peak_mib"] and ref["peak_mib"]:
                row["memory_ratio"] = ref["peak_mib"] / row["peak_mib"]


def versions() -> dict:
    import numpy
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "numpy": numpy.__version__}
    try:
        import torch_geometric
        info["torch_geometric"] = torch_geometric.__version__
    except ImportError:
        info["torch_geometric"] = None
    try:
        import iognn
        info["iognn"] = iognn.__version__
    except ImportError:
        info["iognn"] = None
    return info
