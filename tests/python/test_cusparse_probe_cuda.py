"""cuSPARSE probe: which SpMM configurations work on this GPU machine (diagnostic, CUDA only).

The first cuSPARSE path of iognn's propagate died on the H200 (CUDA 13, cuSPARSE 12.6) with a sticky
"operation not supported on global/shared address space" (cudaErrorInvalidAddressSpace) at the
first graph larger than a few dozen edges (600 nodes, a row of 5,000 entries); every earlier, tiny
graph passed. That path used CSR_ALG3 with cusparseSpMM_preprocess and, on every call, re-set A's
pointers (cusparseCsrSetPointers) and B's and C's (cusparseDnMatSetValues) on the preprocessed
descriptors, in host pointer mode. Each case here runs in a subprocess of its own (a sticky error
kills only that one; six run at a time) with CUDA_LAUNCH_BLOCKING=1 and a device sync after every
cuSPARSE call, so a failure names the call that faulted.

Two kinds of case, named after their configuration:
- raw-<alg>-<pre|nopre>-<setters>-<host|device>-<i32|i64>-<dtype>-F<F>-<matrix>: cusparseSpMM
  called through ctypes on the libcusparse that torch loaded. setters: none; setptr (the earlier
  path: CsrSetPointers with the same pointers + DnMatSetValues after preprocess); newvals (A's values
  pointer changed after preprocess); newdense (B and C changed after preprocess). 16-bit dtypes use
  mixed precision (A, B 16-bit; C and compute float32). Each product runs 3 times: the results must
  match a float64 reference, and be bitwise equal for ALG2 and ALG3 (cuSPARSE documents run-to-run
  differences only for a transposed A; iognn never asks for one).
- op-<backend>-<dtype>-<graph>-...: iognn's propagate ops with IOGNN_PROPAGATE_BACKEND=cusparse or
  auto (the current path) against the own kernels.

Run:  pytest -v -rA -m cuda tests/python/test_cusparse_probe_cuda.py
(-rA also prints each case's result line: cuSPARSE version, steps, determinism.)
"""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytestmark = [pytest.mark.cuda, pytest.mark.cusparse]

# ---- the cases -----------------------------------------------------------------------------------
def raw(alg="alg3", pre=True, setters="none", mode="host", index="i32", dtype="f32", F=8,
        matrix="hub5000"):
    name = (f"raw-{alg}-{'pre' if pre else 'nopre'}-{setters}-{mode}-{index}-{dtype}-F{F}-"
            f"{matrix}")
    return name, dict(kind="raw", alg=alg, pre=pre, setters=setters, mode=mode, index=index,
                      dtype=dtype, F=F, matrix=matrix)


def op(backend, dtype, graph, weighted, reduce, index="i32", F=16, calls=1):
    name = (f"op-{backend}-{dtype}-{graph}-{'weighted' if weighted else 'unweighted'}-{reduce}-"
            f"{index}-F{F}" + (f"-x{calls}" if calls > 1 else ""))
    return name, dict(kind="op", backend=backend, dtype=dtype, graph=graph, weighted=weighted,
                      reduce=reduce, index=index, F=F, calls=calls)


CASES = dict([
    # The earlier production sequence, then one knob at a time.
    raw(setters="setptr"),
    raw(),
    raw(pre=False),
    raw(pre=False, setters="setptr"),
    raw(setters="newvals"),
    raw(setters="newdense"),
    raw(mode="device"),
    raw(pre=False, mode="device"),
    raw(index="i64"),
    raw(pre=False, index="i64"),
    raw(dtype="f64"),
    raw(dtype="bf16"),
    raw(dtype="f16"),
    raw(pre=False, dtype="bf16"),
    # Widths (F = 1 may go through SpMV) and matrix shapes: many blocks without a long row, a
    # 200,000-entry row, empty leading/trailing rows, and the tiny matrix that always passed.
    raw(pre=False, F=1),
    raw(pre=False, F=32),
    raw(pre=False, F=33),
    raw(F=64),
    raw(matrix="uniform"),
    raw(pre=False, matrix="uniform"),
    raw(F=64, matrix="hub200k"),
    raw(pre=False, F=64, matrix="hub200k"),
    raw(pre=False, matrix="empty_rows"),
    raw(matrix="small"),
    # CSR_ALG2, the algorithm of iognn's path (ALG3 faults on long rows above), in the path's
    # configurations: preprocessed, int32 / int64, every dtype (16-bit: mixed precision).
    raw(alg="alg2"),
    raw(alg="alg2", pre=False),
    raw(alg="alg2", matrix="uniform"),
    raw(alg="alg2", F=64, matrix="hub200k"),
    raw(alg="alg2", index="i64"),
    raw(alg="alg2", dtype="f64"),
    raw(alg="alg2", dtype="bf16"),
    raw(alg="alg2", dtype="f16", F=33),
    raw(alg="alg2", pre=False, F=1),
    raw(alg="alg2", pre=False, matrix="empty_rows"),
    # The longest row each algorithm serves (faults for ALG3, determinism for ALG2); iognn's
    # limit, 128, must pass with ALG3.
    *[raw(alg=a, F=64, matrix=f"row{L}") for a in ("alg3", "alg2")
      for L in (128, 256, 512, 1024, 2048, 4096)],
    raw(alg="alg3", pre=False, dtype="bf16", matrix="row128"),
    raw(alg="alg3", index="i64", dtype="f16", F=33, matrix="row128"),
    # Other algorithms (determinism is reported, not required).
    raw(alg="alg1", pre=False),
    raw(alg="default", pre=False),
    # iognn's current cuSPARSE path (the first failing test's configuration first).
    op("cusparse", "f32", "supernode", False, "sum"),
    op("cusparse", "f32", "supernode", False, "mean"),
    op("cusparse", "f32", "supernode", True, "mean"),
    op("cusparse", "f32", "supernode", True, "sum", index="i64"),
    op("cusparse", "f64", "hub", True, "mean"),
    op("cusparse", "bf16", "supernode", False, "mean"),
    op("cusparse", "f16", "hub", False, "sum", F=33),
    op("cusparse", "f32", "hub", True, "mean", calls=4),
    op("auto", "f32", "large", False, "mean", F=64),
    op("auto", "f32", "large", True, "sum", F=64),
])


def run_in_subprocess(name):
    """(result dict or None, exit code, stderr tail) of one case run by a worker process."""
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    try:
        proc = subprocess.run([sys.executable, __file__, json.dumps(CASES[name])], env=env,
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        return None, "timeout", str(e.stderr)[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return (json.loads(lines[-1]) if lines else None), proc.returncode, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def results(request):
    """The results of all cases selected in this session, run a few processes at a time (each
    case is independent: a sticky error stays in its own process and CUDA context)."""
    names = [item.callspec.params["name"] for item in request.session.items
             if item.module is request.module and hasattr(item, "callspec")]
    with ThreadPoolExecutor(max_workers=6) as pool:
        return dict(zip(names, pool.map(run_in_subprocess, names)))


def long_row(matrix):
    """Entries of the matrix's longest row (the hub matrices and row<L>)."""
    return {"hub5000": 5000, "hub200k": 200000}.get(matrix) or (
        int(matrix[3:]) if matrix.startswith("row") else 0)


# What the probe found on CUDA 13 (H100, H200): CSR_ALG3 faults or changes bits run to run once a
# row has 256 entries or more, CSR_ALG2 changes bits from 128 on. Those cases are expected to fail
# (not strictly: a fixed cuSPARSE turns them into XPASS); iognn gives cuSPARSE rows of at most 128
# entries (kernels/cuda/propagate_cusparse.h), the configurations every other case checks.
KNOWN_DEFECT = pytest.mark.xfail(strict=False, reason="cuSPARSE on CUDA 13: long rows (see above)")


def known_defect(case):
    return case["kind"] == "raw" and (
        (case["alg"] == "alg3" and long_row(case["matrix"]) >= 256)
        or (case["alg"] == "alg2" and long_row(case["matrix"]) >= 128))


@pytest.mark.parametrize("name", [pytest.param(n, marks=KNOWN_DEFECT) if known_defect(c) else n
                                  for n, c in CASES.items()])
def test_cusparse_case(name, results):
    result, code, stderr = results[name]
    print(name, json.dumps(result) if result else f"(no result, exit code {code})")
    assert result is not None, f"worker died (exit code {code}):\n{stderr}"
    assert result["ok"], f"failed at {result['step']}: {result['error']}\n{stderr}"


# ---- the worker (python test_cusparse_probe_cuda.py '<case as JSON>') ------------------------------
CUSPARSE_ALGS = {"default": 0, "alg1": 4, "alg2": 6, "alg3": 12}
CUDA_TYPES = {"f32": 0, "f64": 1, "f16": 2, "bf16": 14}
INDEX_32I, INDEX_64I, INDEX_BASE_ZERO, ORDER_ROW, NON_TRANSPOSE = 2, 3, 0, 2, 0
POINTER_MODES = {"host": 0, "device": 1}


class ProbeError(Exception):
    pass


def load_cusparse():
    import ctypes as c

    import torch  # noqa: F401  (loads the libcusparse the probe must use)
    lib = c.CDLL("libcusparse.so.12")
    P, I, I64 = c.c_void_p, c.c_int, c.c_int64
    spmm = [P, I, I, P, P, P, P, P, I, I]
    signatures = {
        "cusparseCreate": [c.POINTER(P)],
        "cusparseDestroy": [P],
        "cusparseGetVersion": [P, c.POINTER(I)],
        "cusparseSetStream": [P, P],
        "cusparseSetPointerMode": [P, I],
        "cusparseCreateCsr": [c.POINTER(P), I64, I64, I64, P, P, P, I, I, I, I],
        "cusparseCsrSetPointers": [P, P, P, P],
        "cusparseCreateDnMat": [c.POINTER(P), I64, I64, I64, P, I, I],
        "cusparseDnMatSetValues": [P, P],
        "cusparseDestroySpMat": [P],
        "cusparseDestroyDnMat": [P],
        "cusparseSpMM_bufferSize": spmm + [c.POINTER(c.c_size_t)],
        "cusparseSpMM_preprocess": spmm + [P],
        "cusparseSpMM": spmm + [P],
    }
    for fn, args in signatures.items():
        getattr(lib, fn).argtypes = args
        getattr(lib, fn).restype = I
    lib.cusparseGetErrorString.argtypes = [I]
    lib.cusparseGetErrorString.restype = c.c_char_p
    return lib


def build_csr(matrix, index_dtype):
    """(rowptr, col, rows, cols) of a test matrix on the GPU, entries sorted by (row, column)."""
    import torch
    gen = torch.Generator().manual_seed(7)
    rand = lambda hi, n: torch.randint(0, hi, (n,), generator=gen)  # noqa: E731
    if matrix == "small":
        n, rows_, cols_ = 30, rand(30, 120), rand(30, 120)
    elif matrix == "hub5000":  # like the supernode graph case: node 0 receives 5,000 edges
        n = 600
        rows_ = torch.cat([torch.zeros(5000, dtype=torch.long), rand(n, 900)])
        cols_ = rand(n, 5900)
    elif matrix == "uniform":  # many thread blocks' worth of rows, none long
        n = 20000
        rows_, cols_ = torch.arange(n).repeat_interleave(16), rand(n, 16 * n)
    elif matrix == "hub200k":
        n = 50000
        rows_ = torch.cat([torch.zeros(200000, dtype=torch.long), rand(n, 100000)])
        cols_ = rand(n, 300000)
    elif matrix.startswith("row"):  # 20,000 rows of 16 entries, row 0 has L ("row<L>")
        n, long_row = 20000, int(matrix[3:])
        rows_ = torch.cat([torch.zeros(long_row, dtype=torch.long),
                           torch.arange(1, n).repeat_interleave(16)])
        cols_ = rand(n, rows_.numel())
    elif matrix == "empty_rows":  # only rows 400..599 have entries
        n = 1000
        rows_, cols_ = 400 + torch.arange(200).repeat_interleave(10), rand(n, 2000)
    else:
        raise ValueError(matrix)
    order = torch.argsort(rows_ * n + cols_)
    rows_, cols_ = rows_[order], cols_[order]
    rowptr = torch.cat([torch.zeros(1, dtype=torch.long),
                        torch.bincount(rows_, minlength=n).cumsum(0)])
    return (rowptr.to(index_dtype).cuda(), cols_.to(index_dtype).cuda(), rows_.cuda(),
            cols_.cuda(), n, n)


def run_raw(case, out):
    import ctypes as c

    import torch
    lib = load_cusparse()
    dtype = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
             "bf16": torch.bfloat16}[case["dtype"]]
    sixteen = dtype in (torch.float16, torch.bfloat16)
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    index_dtype = torch.int64 if case["index"] == "i64" else torch.int32
    idx_type = INDEX_64I if case["index"] == "i64" else INDEX_32I
    value_type = CUDA_TYPES[case["dtype"]]
    compute_type = CUDA_TYPES["f64" if compute == torch.float64 else "f32"]
    alg, F = CUSPARSE_ALGS[case["alg"]], case["F"]

    def call(fn, *args):
        out["step"] = fn
        status = getattr(lib, fn)(*args)
        if status != 0:
            raise ProbeError(f"{fn} returned status {status} "
                             f"({lib.cusparseGetErrorString(status).decode()})")
        torch.cuda.synchronize()  # a fault of this call surfaces here

    out["step"] = "build matrix"
    rowptr, col, row_of, col_of, rows, cols = build_csr(case["matrix"], index_dtype)
    nnz = col.numel()
    gen = torch.Generator(device="cuda").manual_seed(3)
    # 16-bit values must be exact for the reference: ones; otherwise random weights.
    vals = (torch.ones(nnz, device="cuda", dtype=dtype) if sixteen else
            torch.rand(nnz, device="cuda", dtype=dtype, generator=gen))
    B = torch.randn(cols, F, device="cuda", generator=gen).to(dtype)
    C = torch.full((rows, F), float("nan"), device="cuda", dtype=compute if sixteen else dtype)
    ref = torch.zeros(rows, F, device="cuda", dtype=torch.float64).index_add_(
        0, row_of, vals.double()[:, None] * B.double()[col_of])

    handle, A, dB, dC = c.c_void_p(), c.c_void_p(), c.c_void_p(), c.c_void_p()
    call("cusparseCreate", c.byref(handle))
    version = c.c_int()
    call("cusparseGetVersion", handle, c.byref(version))
    out["cusparse_version"] = version.value
    call("cusparseSetStream", handle, c.c_void_p(torch.cuda.current_stream().cuda_stream))
    call("cusparseSetPointerMode", handle, POINTER_MODES[case["mode"]])
    if case["mode"] == "host":
        scalar = c.c_double if compute == torch.float64 else c.c_float
        alpha_obj, beta_obj = scalar(1.0), scalar(0.0)
        alpha, beta = c.c_void_p(c.addressof(alpha_obj)), c.c_void_p(c.addressof(beta_obj))
    else:
        scalars = torch.tensor([1.0, 0.0], device="cuda", dtype=compute)
        alpha = c.c_void_p(scalars.data_ptr())
        beta = c.c_void_p(scalars.data_ptr() + scalars.element_size())
    ptr = lambda t: c.c_void_p(t.data_ptr())  # noqa: E731
    call("cusparseCreateCsr", c.byref(A), rows, cols, nnz, ptr(rowptr), ptr(col), ptr(vals),
         idx_type, idx_type, INDEX_BASE_ZERO, value_type)
    call("cusparseCreateDnMat", c.byref(dB), cols, F, F, ptr(B), value_type, ORDER_ROW)
    call("cusparseCreateDnMat", c.byref(dC), rows, F, F, ptr(C),
         compute_type if sixteen else value_type, ORDER_ROW)
    args = lambda: (handle, NON_TRANSPOSE, NON_TRANSPOSE, alpha, A, dB, beta, dC,  # noqa: E731
                    compute_type, alg)
    size = c.c_size_t()
    call("cusparseSpMM_bufferSize", *args(), c.byref(size))
    out["workspace_bytes"] = size.value
    workspace = torch.empty(max(size.value, 1), device="cuda", dtype=torch.uint8)
    if case["pre"]:
        call("cusparseSpMM_preprocess", *args(), ptr(workspace))
    keep = []
    if case["setters"] == "setptr":
        call("cusparseCsrSetPointers", A, ptr(rowptr), ptr(col), ptr(vals))
        call("cusparseDnMatSetValues", dB, ptr(B))
        call("cusparseDnMatSetValues", dC, ptr(C))
    elif case["setters"] == "newvals":
        keep.append(vals.clone())
        call("cusparseCsrSetPointers", A, ptr(rowptr), ptr(col), ptr(keep[-1]))
    elif case["setters"] == "newdense":
        keep += [B.clone(), torch.full_like(C, float("nan"))]
        B, C = keep[0], keep[1]
        call("cusparseDnMatSetValues", dB, ptr(B))
        call("cusparseDnMatSetValues", dC, ptr(C))
    results = []
    for run in range(3):
        C.fill_(float("nan"))
        call("cusparseSpMM", *args(), ptr(workspace))
        out["step"] = f"check run {run}"
        err = (C.double() - ref).abs().max().item()
        tol = (1e-9 if dtype == torch.float64 else 1e-4) * max(1.0, ref.abs().max().item())
        if not err <= tol:  # also catches NaN (unwritten outputs)
            raise ProbeError(f"run {run}: max error {err:.3g} > {tol:.3g}")
        results.append(C.clone())
    out["bitwise_deterministic"] = all(torch.equal(results[0], r) for r in results[1:])
    if case["alg"] in ("alg2", "alg3") and not out["bitwise_deterministic"]:
        raise ProbeError(f"CSR_{case['alg'].upper()} gave different bits across runs")
    for fn, d in (("cusparseDestroySpMat", A), ("cusparseDestroyDnMat", dB),
                  ("cusparseDestroyDnMat", dC), ("cusparseDestroy", handle)):
        call(fn, d)


def probe_graph(name, index):
    import torch

    import iognn
    gen = torch.Generator().manual_seed(11)
    if name == "supernode":  # tests/python/conftest.py's case: node 0 receives 5,000 edges
        hub_src = torch.randint(0, 600, (5000,), generator=gen)
        ei = torch.cat([torch.stack([hub_src, torch.zeros_like(hub_src)]),
                        torch.randint(0, 600, (2, 900), generator=gen)], 1)
        n = 600
    elif name == "hub":  # heavy in- and out-rows
        n = 3000
        hub = torch.randint(0, n, (20000,), generator=gen)
        ei = torch.cat([torch.stack([hub, torch.full_like(hub, 5)]),
                        torch.stack([torch.full_like(hub, 9), hub]),
                        torch.randint(0, n, (2, 30000), generator=gen)], 1)
    elif name == "large":  # enough work for the auto planner to time (nnz * F >= 2^20)
        n = 20000
        ei = torch.randint(0, n, (2, 60000), generator=gen)
    else:
        raise ValueError(name)
    return iognn.Graph(ei, n, index_dtype=torch.int64 if index == "i64" else None)


def run_op(case, out):
    import torch

    import iognn  # noqa: F401
    ops = torch.ops.iognn
    dtype = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
             "bf16": torch.bfloat16}[case["dtype"]]
    out["step"] = "build graph"
    g = probe_graph(case["graph"], case["index"]).to("cuda")
    gen = torch.Generator(device="cuda").manual_seed(5)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    F, reduce = case["F"], case["reduce"]

    def gathers(backend, w, x, grad):
        os.environ["IOGNN_PROPAGATE_BACKEND"] = backend
        out["step"] = f"{backend} forward"
        y = ops.propagate(g.rowptr, g.col, g.colptr, g.row, g.csc2csr, w, x, reduce)
        torch.cuda.synchronize()
        out["step"] = f"{backend} backward_x"
        gx = ops.propagate_backward_x(g.colptr, g.row, g.csc2csr, g.rowptr, w, grad, reduce)
        torch.cuda.synchronize()
        return y, gx

    tol = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
    for call in range(case["calls"]):  # later calls reuse the plan; weights alternate
        weighted = case["weighted"] if call % 2 == 0 else not case["weighted"]
        x = torch.randn(g.num_src_nodes, F, device="cuda", generator=gen).to(dtype)
        grad = torch.randn(g.num_dst_nodes, F, device="cuda", generator=gen).to(dtype)
        w = torch.rand(g.num_edges, device="cuda", dtype=acc, generator=gen) if weighted else None
        got = gathers(case["backend"], w, x, grad)
        exp = gathers("own", w, x, grad)
        for what, a, b in zip(("forward", "backward_x"), got, exp):
            out["step"] = f"compare {what} (call {call})"
            err = (a.double() - b.double()).abs().max().item()
            bound = tol[dtype] * max(1.0, b.double().abs().max().item())
            if not err <= bound:
                raise ProbeError(f"{what}: max difference from the own kernels {err:.3g}")
        os.environ["IOGNN_PROPAGATE_BACKEND"] = case["backend"]
        out["plan"] = {d: ops.propagate_plan_info(g.rowptr, g.col, g.colptr, g.row, F, dtype, d)
                       for d in ("forward", "backward_x")}


def run_case(case):
    out = {"ok": False, "step": "start", "error": ""}
    try:
        (run_raw if case["kind"] == "raw" else run_op)(case, out)
        out["ok"] = True
    except Exception as e:  # noqa: BLE001  (reported to the parent test)
        out["error"] = f"{type(e).__name__}: {e}"
    return out


if __name__ == "__main__":
    print(json.dumps(run_case(json.loads(sys.argv[1]))), flush=True)
