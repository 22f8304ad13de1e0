"""planrt: memory-planned, delegate-partitioned inference on NVIDIA GPUs and the CPU.

    import planrt
    program = planrt.build("model.onnx", dims={"S": (1, 128)})
    module = planrt.Module(program)
    (y,) = module.run("forward", [x])          # x: a NumPy array or a torch tensor
    print(module.memory_report())

docs/python.md describes the whole API; every error is a planrt.Error subclass named after
its C++ code (InvalidArgumentError, NotFoundError, ...).
"""
from ._errors import (Error, InternalError, InvalidArgumentError, InvalidProgramError, IoError,
                      NotFoundError, NotSupportedError, OutOfMemoryError, OutOfRangeError)
from ._planrt import (BuiltProgram, DimSpec, MemoryEstimate, MethodMeta, Module, PlannedBuffer,
                      PlanStat, SegmentInfo, Tensor, TensorSpec, __version__, build, device_memory,
                      device_memory_ledger, engine_scratch_stats, has_cuda, registered_backends,
                      set_backend_option, trim_engine_scratch_pool, trim_warm_pool,
                      warm_pool_stats)

__all__ = [
    "BuiltProgram", "DimSpec", "Error", "InternalError", "InvalidArgumentError",
    "InvalidProgramError", "IoError", "MemoryEstimate", "MethodMeta", "Module",
    "NotFoundError", "NotSupportedError", "OutOfMemoryError", "OutOfRangeError", "PlanStat",
    "PlannedBuffer", "SegmentInfo", "Tensor", "TensorSpec", "__version__", "build",
    "device_memory", "device_memory_ledger", "engine_scratch_stats", "has_cuda",
    "registered_backends", "set_backend_option", "trim_engine_scratch_pool", "trim_warm_pool", "warm_pool_stats",
]
