"""The default-deny import allowlist for pickles, and the verdict on a walk.

Layer: judging rooms - pure core scanner rules.  Every ``module.name`` a pickle imports
must be on this list, which holds exactly what ``torch.save`` of tensors, state dicts,
optimizer and LR-scheduler state, RNG state (``rng_state.pth``) and transformers'
``TrainingArguments`` (``training_args.bin``) need.  The list was discovered by building
those real artifacts (see ``tests/scan/trainer_checkpoint_test.py``); the torch entries
also match the globals torch's own ``weights_only`` unpickler accepts.  Names are exact
- no module prefixes - so ``torch.load`` or ``numpy.load`` can never slip through.

``STDLIB_DATA`` adds standard-library names that build plain data and run
nothing when called with data (``builtins.len``, ``collections.deque``,
``decimal.Decimal``, ``datetime.datetime``, the ``collections.abc`` classes,
``__future__`` features): other scanners' benign fixtures pickle them, and
an error on them buried the real ones.  What can reach code stays off:
``getattr``, ``eval``, ``exec``, ``compile``, ``open``, ``__import__``,
``type``, ``object``, ``namedtuple`` (it builds a class), and every module
outside this list.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import replace

from ftmanifest.findings import Finding
from ftmanifest.scan.artifacts.pickle_sequence import PickleRun
from ftmanifest.scan.artifacts.pickles import WalkResult, is_flat_tensor_mapping
from ftmanifest.scan.unscanned import part_not_scanned

_DTYPES = (
    "Float Double Half BFloat16 Long Int Short Char Byte Bool ComplexFloat ComplexDouble"
).split()
_QTYPES = "QInt8 QUInt8 QInt32 QUInt4x2 QUInt2x4".split()
_TORCH_DTYPES = (
    "float16 float32 float64 bfloat16 half float double complex32 complex64 complex128 "
    "int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool qint8 quint8 qint32 quint4x2 "
    "quint2x4 float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu "
    "float4_e2m1fn_x2 bits8 bits16 bits1x8 bits2x4 bits4x2"
).split()
_REBUILDERS = (
    "_rebuild_tensor _rebuild_tensor_v2 _rebuild_tensor_v3 _rebuild_parameter "
    "_rebuild_parameter_with_state _rebuild_qtensor _rebuild_sparse_tensor "
    "_rebuild_meta_tensor_no_storage _rebuild_device_tensor_from_numpy "
    "_rebuild_device_tensor_from_cpu_tensor _rebuild_nested_tensor _rebuild_wrapper_subclass"
).split()
_TRAINING_ARGS = (
    "transformers.training_args.TrainingArguments",
    "transformers.training_args.OptimizerNames",
    "transformers.training_args.ParallelMode",
    "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    "transformers.trainer_utils.IntervalStrategy",
    "transformers.trainer_utils.SaveStrategy",
    "transformers.trainer_utils.HubStrategy",
    "transformers.trainer_utils.SchedulerType",
    "transformers.trainer_utils.FSDPOption",
    "transformers.debug_utils.DebugOption",
    "transformers.trainer_pt_utils.AcceleratorConfig",
    "accelerate.state.PartialState",
    "accelerate.utils.dataclasses.DistributedType",
)

DEFAULT_ALLOWED: frozenset[str] = frozenset(
    [f"torch.{d}Storage" for d in _DTYPES + _QTYPES]
    + [f"torch.cuda.{d}Storage" for d in _DTYPES]
    + [f"torch.{d}" for d in _TORCH_DTYPES]
    + [f"torch._utils.{r}" for r in _REBUILDERS]
    + [
        "torch._tensor._rebuild_from_type_v2",
        "torch.serialization._get_layout",
        "torch.storage.TypedStorage",
        "torch.storage.UntypedStorage",
        "torch.UntypedStorage",
        "torch.Size",
        "torch.Tensor",
        "torch.device",
        "torch.nn.parameter.Parameter",
        "torch.per_tensor_affine",
        "torch.per_channel_affine",
        "torch.per_channel_affine_float_qparams",
        "torch.per_tensor_symmetric",
        "torch.per_channel_symmetric",
        # joblib's array wrapper: plain data to pickle; joblib.load reads the array's
        # bytes after it, which the walk reads past too (``joblib_arrays``)
        "joblib.numpy_pickle.NumpyArrayWrapper",
        # numpy arrays and scalars (RNG state, numpy values in state dicts)
        "numpy.core.multiarray._reconstruct",
        "numpy._core.multiarray._reconstruct",
        "numpy.core.multiarray.scalar",
        "numpy._core.multiarray.scalar",
        "numpy.ndarray",
        "numpy.dtype",
        # containers and the protocol-2 spelling of bytes
        "collections.OrderedDict",
        "collections.Counter",
        "_codecs.encode",
    ]
    + [
        f"{m}.{n}"
        for m in ("builtins", "__builtin__")
        for n in ("set", "frozenset", "bytearray", "complex")
    ]
    + list(_TRAINING_ARGS)
)

_ABC = (
    "Iterable Iterator Reversible Generator Sized Container Collection Callable Hashable "
    "Sequence MutableSequence Set MutableSet Mapping MutableMapping MappingView KeysView "
    "ItemsView ValuesView Awaitable Coroutine AsyncIterable AsyncIterator ByteString"
).split()
_BUILTIN_DATA = (
    "len dict list tuple int float str bytes bool range slice min max abs sum round "
    "sorted reversed enumerate zip Ellipsis NotImplemented"
).split()
_FUTURE = (
    "annotations division print_function absolute_import unicode_literals generator_stop "
    "nested_scopes generators with_statement"
).split()
STDLIB_DATA: frozenset[str] = frozenset(
    [f"{m}.{n}" for m in ("builtins", "__builtin__") for n in _BUILTIN_DATA]
    + [f"collections.abc.{n}" for n in _ABC]
    + [f"{m}.{n}" for m in ("_collections_abc", "_abcoll") for n in _ABC]  # _abcoll: protocol 2
    + [f"__future__.{n}" for n in _FUTURE]
    + ["collections.deque", "collections.defaultdict", "collections.ChainMap"]
    + ["decimal.Decimal", "fractions.Fraction", "uuid.UUID"]
    + [f"datetime.{n}" for n in ("datetime", "date", "time", "timedelta", "timezone")]
)
DEFAULT_ALLOWED = DEFAULT_ALLOWED | STDLIB_DATA

HINT = (
    "never load this file with pickle or torch.load(weights_only=False); "
    "re-export the weights as safetensors from a trusted source"
)
WEIGHTS_HINT = "save the state dict with safetensors (save_file) instead of torch.save"


def fingerprint(*parts: str) -> str:
    """A stable, location-free fingerprint for a baseline (imports are not secrets)."""
    return "sha256:" + hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def judge(
    result: WalkResult,
    *,
    path: str,
    member: str | None = None,
    allow: Iterable[str] = (),
    weights_check: bool = True,
) -> list[Finding]:
    """Turn one walk into findings: imports off the list, defects, caps."""
    allowed = DEFAULT_ALLOWED.union(allow)
    where = f" in {member}" if member else ""
    out: list[Finding] = []
    seen: dict[str, int] = {}
    for imp in result.imports:
        if imp.dotted in allowed:
            continue
        seen[imp.dotted] = seen.get(imp.dotted, 0) + 1
        if seen[imp.dotted] > 1:
            continue
        out.append(
            Finding(
                kind="unsafe-pickle",
                rule="pickle.unsafe-import",
                message=f"pickle imports {imp.dotted} at offset {imp.offset}{where}"
                + (f" ({imp.opcode.split(' ', 1)[1]})" if " stored as bytes" in imp.opcode else ""),
                path=path,
                field=member,
                expected="an import on the torch/transformers allowlist",
                observed=imp.dotted,
                severity="error",
                hint=HINT,
                fingerprint=fingerprint("pickle.unsafe-import", imp.dotted),
                extra={
                    "offset": imp.offset,
                    "member": member,
                    "import": imp.dotted,
                    "opcode": imp.opcode,
                },
            )
        )
    for prob in result.problems:
        unsafe = prob.kind == "unsafe-pickle"
        out.append(
            Finding(
                kind=prob.kind,
                rule=prob.rule,
                message=f"{prob.message}{where} (offset {prob.offset})",
                path=path,
                field=member,
                severity="error" if unsafe or prob.rule == "pickle.truncated" else "warning",
                hint=HINT if unsafe else None,
                fingerprint=fingerprint(prob.rule, member or ""),
                extra={"offset": prob.offset, "member": member},
            )
        )
    if result.capped:
        out.append(
            part_not_scanned(path, f"pickle not fully scanned{where}: {result.capped}", member)
        )
    if weights_check and not out and result.stopped and is_flat_tensor_mapping(result.value):
        out.append(weights_finding(path, member))
    return out


def judge_run(
    run: PickleRun,
    *,
    path: str,
    member: str | None = None,
    allow: Iterable[str] = (),
    main: int = 0,
    raw_tail: bool = False,
) -> list[Finding]:
    """Findings for pickles in a row (``pickle_sequence.walk_pickles``).

    ``main`` is the index of the object the loader returns (3 in a legacy torch
    file), checked for weights stored as a pickle; ``raw_tail`` says bytes after
    the last pickle are data the loader reads raw (legacy torch storages).
    """
    out: list[Finding] = []
    first = run.first_array if run.joblib else None
    for res in run.walks:
        if first is not None:  # the plain unpickler raises at an array's bytes; joblib reads on
            kept = [p for p in res.problems if p.offset < first or p.kind == "unsafe-pickle"]
            res = replace(res, problems=kept)
        out += judge(res, path=path, member=member, allow=allow, weights_check=False)
    known = {(f.rule, f.observed or f.message) for f in out}
    for res in run.joblib:  # what joblib.load meets after the arrays' bytes
        for f in judge(res, path=path, member=member, allow=allow, weights_check=False):
            if (f.rule, f.observed or f.message) not in known:
                known.add((f.rule, f.observed or f.message))
                out.append(f._replace(extra={**f.extra, "reading": "joblib.load"}))
    seen = {(f.rule, f.observed) for f in out}
    for res in run.dropping:  # what a reader that drops a straddled frame's rest meets
        for f in judge(res, path=path, member=member, allow=allow, weights_check=False):
            if f.severity == "error" and (f.rule, f.observed) not in seen:
                seen.add((f.rule, f.observed))
                out.append(f._replace(extra={**f.extra, "reading": "frames dropped"}))
    if run.capped:
        out.append(part_not_scanned(path, f"pickle stream not fully scanned: {run.capped}", member))
    read_on = first is not None and run.trailing is not None and run.trailing >= first
    if run.trailing is not None and not raw_tail and not read_on:
        why = f" ({run.trailing_problem.message})" if run.trailing_problem else ""
        where = f" in {member}" if member else ""
        out.append(
            Finding(
                kind="malformed",
                rule="pickle.trailing-data",
                message=(
                    f"bytes after the pickle's STOP, from offset {run.trailing}{where}, are no "
                    f"pickle the unpickler would run{why}; no pickle loader reads them"
                ),
                path=path,
                field=member,
                severity="warning",
                hint="a file should hold one pickle and nothing after it; inspect the tail",
                fingerprint=fingerprint("pickle.trailing-data", member or ""),
                extra={"offset": run.trailing, "member": member},
            )
        )
    if len(run.walks) > main and not out:
        res = run.walks[main]
        if res.stopped and is_flat_tensor_mapping(res.value):
            out.append(weights_finding(path, member))
    return out


def weights_finding(path: str, member: str | None = None) -> Finding:
    where = f" in {member}" if member else ""
    return Finding(
        kind="unsafe-pickle",
        rule="pickle.weights-as-pickle",
        message=f"tensor weights stored as a pickle{where}; safetensors would do",
        path=path,
        field=member,
        severity="info",
        hint=WEIGHTS_HINT,
        fingerprint=fingerprint("pickle.weights-as-pickle", member or ""),
        extra={"member": member},
    )
