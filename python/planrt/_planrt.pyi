"""Type stubs of planrt's extension module (docs/python.md). Errors: planrt._errors."""
from __future__ import annotations

import os
from typing import Any, Mapping, Protocol, Sequence, Union

import numpy as np

__version__: str
has_cuda: bool

PathLike = Union[str, os.PathLike[str]]
#: A NumPy array, an object with ``__dlpack__`` (a torch tensor), or anything numpy.asarray takes.
InputValue = Any
#: {"cuda": {"use_cuda_graphs": True}} or {"cuda.use_cuda_graphs": "true"}.
BackendOptions = Mapping[str, Any]


class Tensor:
    """An output held in planrt's host memory; exports DLPack without a copy."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def nbytes(self) -> int: ...
    def numpy(self) -> np.ndarray: ...
    def __array__(self, dtype: Any = None) -> np.ndarray: ...
    def __dlpack__(self, stream: Any = None) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...


class DimSpec:
    name: str
    min: int
    max: int


class TensorSpec:
    name: str
    dtype: str
    #: ints for static dims, names ("S", "2*S") for dynamic ones
    shape: list[Union[int, str]]


class PlannedBuffer:
    size_bytes: int
    device: str


class SegmentInfo:
    name: str
    backend: str
    device: str
    num_nodes: int
    blob_bytes: int
    scratch_bytes: int
    shared_scratch: bool
    planned_scratch: bool


class PlanStat:
    device: str
    planner: str
    lower_bound_bytes: int
    planned_bytes: int
    num_tensors: int


class MemoryEstimate:
    device: str
    planned_bytes: int
    weights_bytes: int
    engine_scratch_bytes: int
    library_bytes: int
    page_rounding_bytes: int
    uses_warm_pool: bool
    @property
    def total_bytes(self) -> int: ...
    @property
    def predicted_bytes(self) -> int: ...


class MethodMeta:
    name: str
    dims: list[DimSpec]
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    planned_buffers: list[PlannedBuffer]
    segments: list[SegmentInfo]
    backends: list[str]
    plan: list[PlanStat]
    memory: list[MemoryEstimate]
    num_instructions: int
    uses_device_memory: bool


class BuiltProgram:
    """A program built in memory by build()."""

    def save(self, path: PathLike) -> None: ...
    def to_bytes(self) -> bytes: ...
    @property
    def num_constants(self) -> int: ...
    @property
    def constants_bytes(self) -> int: ...
    @property
    def plans(self) -> list[dict[str, Any]]: ...


class Module:
    """A loaded program: method metadata, loading, runs, memory report. Thread-safe."""

    def __init__(self, source: Union[PathLike, bytes, bytearray, memoryview, BuiltProgram],
                 backend_options: BackendOptions | None = None, share_memory_arenas: bool = True,
                 max_planned_bytes_per_device: int = 0, synchronize_each_step: bool = False,
                 share_device_arenas: bool = False, profile_steps: bool = False) -> None: ...
    def method_names(self) -> list[str]: ...
    def method_meta(self, name: str) -> MethodMeta: ...
    def load_method(self, name: str) -> None: ...
    def unload_method(self, name: str) -> None: ...
    def is_method_loaded(self, name: str) -> bool: ...
    def loaded_methods(self) -> list[str]: ...
    def run(self, name: str,
            inputs: Union[Sequence[InputValue], Mapping[str, InputValue], InputValue],
            outputs: str = "numpy") -> list[Any]:
        """Outputs: NumPy arrays (outputs="numpy") or planrt.Tensor objects ("dlpack")."""
    def run_stats(self, name: str) -> dict[str, int]: ...
    def step_profile(self, name: str) -> list[dict[str, Any]]: ...
    def memory_report(self) -> dict[str, Any]: ...
    @property
    def constants_bytes(self) -> int: ...


class _SerializedModel(Protocol):
    # onnx.ModelProto, or anything else that serializes to an ONNX model's bytes.
    def SerializeToString(self) -> bytes: ...

def build(model: PathLike | bytes | bytearray | memoryview | _SerializedModel | None = None, *,
          template: str | None = None,
          dims: Mapping[str, Union[int, tuple[int, int]]] | None = None,
          input_values: Mapping[str, PathLike] | None = None, partition: str = "cpu",
          device: str | None = None, dtype: str = "f32", attention: str = "fused",
          shared_scratch: bool = False, external_weights: bool = False, no_reuse: bool = False,
          layers: int = 2, d_model: int = 512, heads: int = 8,
          ffn: Union[int, Sequence[int]] = 2048, max_seq: int = 2048, weights: str = "random:0",
          method: str = "forward", plan_time_budget_ms: float = 500.0,
          engine_scratch: str = "", cuda_scratch: str = "planned") -> BuiltProgram: ...


def engine_scratch_stats(device: str = "cpu") -> dict[str, Any]: ...
def trim_engine_scratch_pool(device: str = "cpu") -> None: ...
def warm_pool_stats(device: str = "cuda:0") -> dict[str, Any]: ...
def trim_warm_pool(device: str = "cuda:0") -> None: ...
def device_memory(device: str = "cuda:0") -> dict[str, Any]: ...
def device_memory_ledger(device: str, baseline_used_bytes: int) -> dict[str, Any]: ...
def set_backend_option(backend: str, key: str, value: str) -> None: ...
def registered_backends() -> list[str]: ...
