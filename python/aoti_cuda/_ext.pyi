"""Type stubs of aoti_cuda._ext, the compiled part of the aoti_cuda package (python/src/bindings.cpp).

Tensor arguments ("TensorLike") are torch tensors, NumPy arrays or any object with ``__dlpack__``
(or an unused DLPack capsule). Every SDK failure raises ``aoti_cuda.Error`` with an ``ErrorCode``.
"""

from collections.abc import Callable, Sequence
from os import PathLike
from typing import Any, Literal, Optional, Union

TensorLike = Any
"""torch.Tensor, numpy.ndarray, an object with __dlpack__, or a "dltensor" capsule."""
DeviceLike = Union[str, int, Any]
"""'cpu', 'cuda', 'cuda:N', a CUDA ordinal, or a torch.device."""
StreamLike = Union[int, Any]
"""A cudaStream_t value (0: the legacy default stream) or an object with ``cuda_stream``."""

class LoadProgress:
    """One phase of a load, passed to ``Module(on_progress=...)``."""

    @property
    def phase(self) -> str:
        """'parse', 'library', 'container' or 'weights'."""
    @property
    def method(self) -> str:
        """The method being loaded ('' for 'parse')."""
    @property
    def done(self) -> int:
        """Delegates through this phase so far, this one included (1 for 'parse')."""
    @property
    def total(self) -> int:
        """Delegates to load in all selected methods (1 for 'parse')."""

class TensorSpec:
    """A method input or output as the program declares it."""

    @property
    def dtype(self) -> str:
        """PyTorch-style dtype name, e.g. 'float32', 'bfloat16', 'int64'."""
    @property
    def shape(self) -> tuple[int, ...]:
        """Static shape; for a dynamic tensor the upper bound of each dimension."""
    @property
    def dynamic(self) -> bool:
        """True when dimensions may be smaller than ``shape`` at run time."""
    @property
    def dim_order(self) -> list[int]:
        """Memory order, outermost first ([0, 1, ...] = contiguous)."""

class DynamicDim:
    """A dimension of an input that may vary, up to ``max``."""

    @property
    def dim(self) -> int: ...
    @property
    def max(self) -> int: ...

class MethodMeta:
    """Signature of a loaded method (``Module.method_meta``)."""

    @property
    def name(self) -> str: ...
    @property
    def inputs(self) -> list[TensorSpec]: ...
    @property
    def outputs(self) -> list[TensorSpec]: ...
    @property
    def num_delegates(self) -> int:
        """CUDA delegates (model libraries) the method runs."""
    @property
    def input_names(self) -> list[str]:
        """The exported program's argument names ('' where unknown), parallel to ``inputs``."""
    @property
    def output_names(self) -> list[str]: ...
    @property
    def dynamic_dims(self) -> list[list[DynamicDim]]:
        """Parallel to ``inputs``: the dimensions that may vary (empty for a static input)."""

class GraphStatus:
    """How CUDA graphs fare for one method (``Module.graph_status``)."""

    @property
    def requested(self) -> bool: ...
    @property
    def available(self) -> bool:
        """False once graphs were found unusable for the method (calls take the plain path)."""
    @property
    def reason(self) -> str:
        """Why graphs are not available ('' when they are)."""
    @property
    def graphs(self) -> int: ...
    @property
    def captures(self) -> int: ...
    @property
    def replays(self) -> int: ...
    @property
    def evictions(self) -> int: ...

class LibraryHooks:
    """How one model library's CUDA imports were bound (docs/cuda-hooks.md)."""

    @property
    def library(self) -> str: ...
    @property
    def hooked(self) -> list[str]: ...
    @property
    def warnings(self) -> list[str]: ...

class LoadStats:
    """What loading installed, deduplicated and shared (``Module.load_stats``)."""

    @property
    def weight_bytes(self) -> int: ...
    @property
    def deduplicated_bytes(self) -> int: ...
    @property
    def deduplicated_constants(self) -> int: ...
    @property
    def shared_state_constants(self) -> int: ...
    @property
    def read_only_constants(self) -> int: ...
    @property
    def upload_ms(self) -> float: ...
    @property
    def upload_gb_per_s(self) -> float: ...
    @property
    def page_locked_bytes(self) -> int: ...
    @property
    def staged_bytes(self) -> int: ...
    @property
    def upload_note(self) -> str: ...
    @property
    def compare_ms(self) -> float: ...
    @property
    def libraries(self) -> list[LibraryHooks]: ...

class LoadTimings:
    """Wall-clock milliseconds of each load phase (``Module.load_timings``)."""

    @property
    def parse_ms(self) -> float: ...
    @property
    def device_init_ms(self) -> float: ...
    @property
    def library_ms(self) -> float: ...
    @property
    def container_ms(self) -> float: ...
    @property
    def weights_ms(self) -> float: ...
    @property
    def total_ms(self) -> float: ...

class MemoryStats:
    """The shim allocator's counters for one CUDA device (``device_memory_stats``)."""

    @property
    def bytes_in_use(self) -> int: ...
    @property
    def peak_bytes_in_use(self) -> int: ...
    @property
    def live_allocations(self) -> int: ...
    @property
    def total_allocations(self) -> int: ...
    @property
    def pool_reserved_bytes(self) -> int: ...
    @property
    def cached_bytes(self) -> int: ...
    @property
    def cache_hits(self) -> int: ...

class Session:
    """An independent copy of a Module's mutable state (e.g. one KV cache per conversation).

    Made by ``Module.create_session()``, chosen per call with ``session=``. Keeps its Module alive;
    closing the Module closes its Sessions. After ``close()`` every use raises Error(INVALID_ARGUMENT).
    """

    def reset(self) -> None:
        """Puts the state back to its initial bytes."""
    @property
    def state_bytes(self) -> int:
        """Device bytes this session owns."""
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Frees the state now (idempotent); waits for calls using it."""
    def __enter__(self) -> Session: ...
    def __exit__(self, *args: object) -> None: ...

class Module:
    """A loaded ExecuTorch CUDA program, ready to run.

    Calls release the GIL while they run and may come from several threads. After ``close()``
    every use raises Error(INVALID_ARGUMENT).
    """

    def __init__(
        self,
        path: Union[str, PathLike[str]],
        *,
        data_files: Optional[Union[str, Sequence[str]]] = None,
        device: Optional[DeviceLike] = None,
        num_models: int = 1,
        methods: Optional[Union[str, Sequence[str]]] = None,
        cuda_graphs: Union[bool, Sequence[str]] = False,
        max_graphs_per_method: int = 4,
        share_state: Union[None, bool, Literal["all"], Sequence[str]] = None,
        deduplicate_constants: bool = True,
        allowed_so_sha256: Optional[Sequence[str]] = None,
        tuning: Optional[dict[str, Any]] = None,
        on_progress: Optional[Callable[[LoadProgress], object]] = None,
        output_type: Literal["auto", "torch", "numpy", "dlpack"] = "auto",
    ) -> None:
        """Loads ``path`` (and ``aoti_cuda_blob.ptd`` beside it unless ``data_files`` names others).

        device: where the model runs (default 'cuda:0'; 'cpu' only for CPU model libraries).
        num_models: concurrent calls per method. methods: load only these. cuda_graphs: True for
        every method, or the names of the methods to capture. share_state: 'all' (or True) shares
        every buffer held by several methods under one name (e.g. a KV cache of prefill and decode),
        or the buffers' names. tuning: performance settings by name (upload_threads, staging
        ('huge', 'wc', 'hostalloc'), page_lock_weights, block_cache_mib, small_copy_kernels,
        gemv_max_rows, int4_dequant_min_m, cublas_workspace_mib, dependent_launch,
        attention_cluster (-1 auto, 0, 8 or 16); C++ TuningOptions); unset ones
        come from the environment, else the defaults. on_progress: called after each load phase; an exception it raises
        aborts the load and is re-raised. output_type: 'torch' (torch tensors), 'numpy' (NumPy
        arrays; outputs come to the host), 'dlpack' (objects with __dlpack__), or 'auto': torch
        when it can be imported, else NumPy for host outputs and DLPack objects for device ones.
        """
    def forward(
        self,
        *inputs: TensorLike,
        session: Optional[Session] = None,
        stream: Optional[StreamLike] = None,
        outputs: Optional[Literal["same", "host", "device"]] = None,
        use_graph: Optional[bool] = None,
        out: Optional[Union[TensorLike, Sequence[TensorLike]]] = None,
    ) -> Any:
        """``execute("forward", *inputs, ...)``."""
    def execute(
        self,
        method: str,
        *inputs: TensorLike,
        session: Optional[Session] = None,
        stream: Optional[StreamLike] = None,
        outputs: Optional[Literal["same", "host", "device"]] = None,
        use_graph: Optional[bool] = None,
        out: Optional[Union[TensorLike, Sequence[TensorLike]]] = None,
    ) -> Any:
        """Runs ``method``; returns a list with one tensor per output (no copies), or ``out``.

        session: whose state the call uses (default: the Module's own). stream: the CUDA stream
        to run on; by default torch's current stream when an input is a torch CUDA tensor (the
        call then returns once the work is queued, in torch's order), otherwise the Module's own
        (the call returns when the results are ready). outputs: 'host', 'device' or 'same' (as
        the first input; the default). use_graph: override the load's CUDA-graph setting for this
        call. out: write the outputs into these tensors instead (one per output, contiguous, of
        the output's dtype and shape, on the host or the Module's device); returns ``out``.
        """
    def execute_into(
        self,
        method: str,
        inputs: Sequence[TensorLike],
        outputs: Union[TensorLike, Sequence[TensorLike]],
        *,
        session: Optional[Session] = None,
        stream: Optional[StreamLike] = None,
        use_graph: Optional[bool] = None,
    ) -> None:
        """Runs ``method`` and writes its outputs into ``outputs`` (bound outputs: nothing is allocated)."""
    def method_names(self) -> list[str]: ...
    @property
    def default_method(self) -> str:
        """'forward' when loaded, else the first method."""
    def method_meta(self, method: str) -> MethodMeta: ...
    def graph_status(self, method: str) -> GraphStatus: ...
    def load_stats(self) -> LoadStats: ...
    def load_timings(self) -> LoadTimings: ...
    def tuning(self) -> dict[str, Any]:
        """The tuning the Module was loaded with, every setting filled in (same keys as ``tuning=``)."""
    @property
    def state_bytes(self) -> int:
        """Device bytes of one copy of the mutable state."""
    def reset_state(self) -> None:
        """Puts the Module's own state (not the sessions') back to its initial bytes."""
    def create_session(self) -> Session: ...
    @property
    def device(self) -> str:
        """'cpu' or 'cuda:N'."""
    @property
    def output_type(self) -> str:
        """'torch', 'numpy', 'dlpack' or 'auto' (no torch: NumPy on the host, DLPack on the device)."""
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Closes the Module's sessions, then unloads it (idempotent). Outputs stay valid."""
    def __enter__(self) -> Module: ...
    def __exit__(self, *args: object) -> None: ...
    def _bench(
        self,
        method: str,
        inputs: Sequence[TensorLike],
        runs: int,
        warmup: int = 10,
        out: Optional[Union[TensorLike, Sequence[TensorLike]]] = None,
        session: Optional[Session] = None,
        stream: Optional[StreamLike] = None,
        use_graph: Optional[bool] = None,
    ) -> list[float]:
        """Nanoseconds of each of ``runs`` C++ ``execute`` calls with the options ``execute`` would use
        (bench/python_overhead.py's baseline); waits for the stream between calls, outside the timing."""

def version() -> str:
    """The SDK's version, e.g. '0.1.0'."""

def device_count() -> int:
    """CUDA devices this process can use (0 without a driver)."""

def gpu_unavailable_reason() -> str:
    """Why no GPU can be used here ('' when one can)."""

def device_memory_stats(device: int = 0) -> MemoryStats: ...
def trim_device_memory(device: int = 0, keep_bytes: int = 0) -> None:
    """Gives cached device memory above ``keep_bytes`` back to the driver (synchronizes the device)."""

def set_log_level(level: Literal["debug", "info", "warning", "error"]) -> None:
    """The least severe SDK message that is still written (to stderr, or the handler set in C++)."""

def _set_error_class(cls: type) -> None: ...
def _torch_route() -> str: ...
