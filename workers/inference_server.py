"""The shared model server: merges leaf evaluations from many self-play workers.

``InferenceServer`` is a plain class; cluster/ makes it an actor at launch with
``ray.remote(InferenceServer).options(max_concurrency=..., num_gpus=1)``. Because
``evaluate`` is a coroutine, Ray runs it as an async actor: every worker's request is
a coroutine on one event loop, and one batcher task turns them into model calls.

A request is one worker's leaf batch ``planes[B, H, W, C]`` (uint8 or float32, or
uint8 0s and 1s bit-packed as workers/packed_planes.py defines, as the Ray workers send
it: a go9 batch then travels inside the call, not through the object store). The
batcher flushes the waiting requests as one batch when

(a) ``clients`` requests are waiting (every attached worker has one in: the server
    counts requests, not callers, so a worker that keeps two half-batches in flight
    counts twice while both wait),
(b) the waiting rows reach ``max_batch``, or
(c) ``batch_timeout_ms`` has passed since the oldest waiting request arrived.

A batch takes whole requests, oldest first, up to ``max_batch`` rows (a single
request larger than that goes alone). The model runs on executor threads so that
the event loop keeps accepting requests while it computes; no batch shape ever
retraces (CompiledModel pads each batch to a fixed bucket size under XLA, and runs any
size from one trace without it).

The timeout is measured on ``clock`` (``time.perf_counter`` unless given): a test
passes a clock it moves itself and sees the batch flush when that clock passes the
deadline, whatever the machine's pace.

``model_calls`` batches may be in the model at once. On a CPU a model call cannot
keep several cores busy (its ops are too small to split well: one TensorFlow thread
evaluates more rows per core-second than two), so a CPU server does better running
calls side by side, each on its own share of TensorFlow's threads, than one call on
all of them. A weights hot swap waits for the calls in flight and holds new ones
back, so it lands between batches and every batch is computed by one version.

Given a ``metrics`` recorder (cluster/inference_pool.py passes the run's
``RunMetrics``, whose table in cluster/metrics.py names and describes every metric),
the server records its batch sizes, latencies, queue depth and model version; as a
plain object (tests, benchmarks) it records none.

With ``score_utility`` > 0 (``mcts.score_utility``; a network with the score head) the
server answers each leaf's value with KataGo's score utility added
(engine/mcts/evaluators.py's ``with_score_utility``): self-play's search, its cache and
its games take policy and value only, and back the utility up as part of the value.

Given a ``model`` (a ``BatchModel``), the server calls it in place of the network it
would build: bench/pipeline_ceiling.py passes tengen.testing's ``InstantEvaluator``,
which answers at once, to measure what the rest of the path can carry. No config
reaches it: the run's servers (cluster/inference_pool.py) always build the network.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tengen.engine.network_spec import NetworkSpec
from tengen.workers.packed_planes import PackedPlanes

if TYPE_CHECKING:
    from tengen.engine.network import CompiledModel

__all__ = ["BatchModel", "InferenceServer", "MetricsRecorder"]

_ACCEPTED_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32))


@dataclass
class _Request:
    planes: np.ndarray  # [B, H, W, C] uint8 or float32
    future: asyncio.Future
    arrived: float  # on the server's clock


class MetricsRecorder(Protocol):
    """Where the server's measurements go (cluster.metrics.RunMetrics inside Ray,
    whose table names and describes every metric of the run)."""

    def inc(self, name: str, value: float = 1.0, **tags: str) -> None: ...

    def set(self, name: str, value: float, **tags: str) -> None: ...

    def observe(self, name: str, value: float, **tags: str) -> None: ...


class BatchModel(Protocol):
    """What the server calls on its model: ``CompiledModel``, or a stand-in."""

    input_shape: tuple[int, ...]  # (H, W, C)
    trace_count: int

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``planes[B, H, W, C]`` -> ``(policy float32[B, A], value float32[B])``."""
        ...

    def load_weights_blob(self, blob: bytes) -> object: ...


class InferenceServer:
    """Batches ``evaluate`` requests from many workers into single compiled model calls.

    ``network`` is the network's spec (the run config's ``network_spec()``); ``weights`` is a
    weights blob to start from (None: fresh initialisation, for tests and benches).
    ``mixed_precision`` None means on when TensorFlow sees a GPU. ``model_calls`` above 1
    runs that many batches at once and gives each op a share of the cores (set before
    TensorFlow's first op in the process; in a process where it has already started,
    the calls share its threads as they are). ``model``: what to call in place of the
    network (None: the network built from ``network``; see the module's docstring).
    """

    def __init__(
        self,
        *,
        network: NetworkSpec,
        weights: bytes | None = None,
        version: int = 0,
        max_batch: int = 1024,
        batch_timeout_ms: float = 5.0,
        clients: int = 1,
        mixed_precision: bool | None = None,
        model_calls: int = 1,
        metrics: MetricsRecorder | None = None,
        clock: Callable[[], float] = time.perf_counter,
        model: BatchModel | None = None,
        score_utility: float = 0.0,
    ):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if batch_timeout_ms < 0:
            raise ValueError(f"batch_timeout_ms must be >= 0, got {batch_timeout_ms}")
        self._check_clients(clients)
        if model_calls < 1:
            raise ValueError(f"model_calls must be >= 1, got {model_calls}")
        self.model_calls = int(model_calls)
        self.max_batch = int(max_batch)
        self.batch_timeout_s = float(batch_timeout_ms) / 1000.0
        self.clients = int(clients)
        self._clock = clock
        self._model: BatchModel
        if model is None:
            self._model, self.mixed_precision = self._build(network, mixed_precision)
        else:  # a stand-in: no backend is started
            self._model, self.mixed_precision = model, False
        if weights is not None:
            self._model.load_weights_blob(bytes(weights))
        self._version = int(version)
        self.input_shape: tuple[int, ...] = self._model.input_shape
        self.num_actions = network.num_actions
        #: the model's answers with the score utility folded in (None: the model's own)
        self._with_utility: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
        if score_utility > 0:
            from tengen.engine.mcts.evaluators import utility_scale, with_score_utility

            if getattr(self._model, "with_score", None) is None:
                raise ValueError("score_utility needs a network with the score head (network.score)")
            self._with_utility = with_score_utility(self._scored, weight=score_utility,
                                                    side=utility_scale(*self.input_shape[:2]))

        self._model_use = _CallsAndSwaps()
        self._executor = ThreadPoolExecutor(max_workers=self.model_calls, thread_name_prefix="inference-model")
        # the event-loop side, (re)made on the first request of each loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: deque[_Request] = deque()
        self._pending_rows = 0
        self._wakeup: asyncio.Event | None = None
        self._free_calls: asyncio.Semaphore | None = None
        self._batcher: asyncio.Task | None = None
        self._in_model: set[asyncio.Task] = set()

        self._evaluations = 0
        self._batches = 0
        self._model_seconds = 0.0
        self._metrics = metrics
        if metrics is not None:
            metrics.set("tengen_model_version", self._version, component="inference")

    def _scored(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # the model looked up at each call, as a plain call does (a weights swap keeps it)
        return self._model.with_score(planes)  # type: ignore[attr-defined]

    def _build(self, network: NetworkSpec, mixed_precision: bool | None) -> tuple[CompiledModel, bool]:
        """The network, compiled, and whether it computes in mixed precision."""
        # Imported here, not at the top: Ray imports an actor's module into every process
        # that is handed its handle, and a self-play worker that has TensorFlow (or
        # another backend) mapped holds about 480 MiB more for nothing.
        from tengen.engine.backend import gpu_available, share_cpu_threads, share_gpu_memory
        from tengen.engine.network import CompiledModel

        if self.model_calls > 1:
            share_cpu_threads(self.model_calls)
        share_gpu_memory()
        mixed = gpu_available() if mixed_precision is None else bool(mixed_precision)
        return CompiledModel(network.build(mixed_precision=mixed)), mixed

    # -- requests --------------------------------------------------------------------------

    async def evaluate(self, planes: np.ndarray | PackedPlanes) -> tuple[np.ndarray, np.ndarray]:
        """``planes[B, H, W, C]`` uint8 or float32, or packed -> ``(policy float32[B, A], value float32[B])``.

        Raises ValueError for a wrong shape or dtype; other requests are not affected.
        """
        planes = planes.unpack() if isinstance(planes, PackedPlanes) else np.asarray(planes)
        if planes.ndim != 4 or tuple(planes.shape[1:]) != self.input_shape:
            raise ValueError(f"planes must be [B, {', '.join(map(str, self.input_shape))}], got {planes.shape}")
        if planes.dtype not in _ACCEPTED_DTYPES:
            raise ValueError(f"planes must be uint8 or float32, got {planes.dtype}")
        if planes.shape[0] == 0:
            return np.zeros((0, self.num_actions), np.float32), np.zeros((0,), np.float32)
        loop = asyncio.get_running_loop()
        if loop is not self._loop or self._batcher is None or self._batcher.done():
            self._start(loop)
        assert self._wakeup is not None
        request = _Request(planes, loop.create_future(), self._clock())
        self._pending.append(request)
        self._pending_rows += planes.shape[0]
        self._wakeup.set()
        return await request.future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        # A new loop (a plain object used from several asyncio.run calls): requests
        # queued on an old loop can never be answered there, so they are dropped.
        if loop is not self._loop:
            self._pending.clear()
            self._pending_rows = 0
            self._wakeup = asyncio.Event()
            self._free_calls = asyncio.Semaphore(self.model_calls)
            self._loop = loop
        self._batcher = loop.create_task(self._batch_loop(), name="inference-batcher")

    def _ready(self) -> bool:
        return len(self._pending) >= self.clients or self._pending_rows >= self.max_batch

    async def _batch_loop(self) -> None:
        assert self._free_calls is not None
        free_calls = self._free_calls
        loop = asyncio.get_running_loop()
        while True:
            # A batch is formed only when the model can take it: requests that arrive
            # meanwhile join it, so batches are as large as the model's pace allows.
            await free_calls.acquire()
            try:
                batch = await self._next_batch()
            except BaseException:  # the loop is closing: the call was never made
                free_calls.release()
                raise
            call = loop.create_task(self._run_batch(loop, batch))
            self._in_model.add(call)
            call.add_done_callback(self._in_model.discard)
            call.add_done_callback(lambda _: free_calls.release())

    async def _next_batch(self) -> list[_Request]:
        """Waits for the flush rule, then takes the batch (at least one request)."""
        assert self._wakeup is not None
        wakeup = self._wakeup
        while True:
            while not self._pending:
                wakeup.clear()
                await wakeup.wait()
            deadline = self._pending[0].arrived + self.batch_timeout_s
            while not self._ready():
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                wakeup.clear()
                try:
                    await asyncio.wait_for(wakeup.wait(), remaining)
                except TimeoutError:
                    pass  # the clock says whether the deadline has passed
            batch = self._take_batch()
            if batch:  # else every waiting caller had gone away
                return batch

    def _take_batch(self) -> list[_Request]:
        """Whole requests, oldest first, up to ``max_batch`` rows (none if every waiting
        caller went away)."""
        if self._metrics is not None:
            self._metrics.set("tengen_inference_queue_depth", len(self._pending))
        batch: list[_Request] = []
        rows = 0
        while self._pending:
            n = self._pending[0].planes.shape[0]
            if batch and rows + n > self.max_batch:
                break
            request = self._pending.popleft()
            self._pending_rows -= n
            if request.future.done():  # the caller went away (cancelled)
                continue
            batch.append(request)
            rows += n
        return batch

    async def _run_batch(self, loop: asyncio.AbstractEventLoop, batch: list[_Request]) -> None:
        try:
            policy, value, seconds = await loop.run_in_executor(
                self._executor, self._compute, [r.planes for r in batch]
            )
        except Exception as err:  # a failed model call fails its batch, not the server
            for request in batch:
                if not request.future.done():
                    request.future.set_exception(err)
            return
        rows = policy.shape[0]
        self._evaluations += rows
        self._batches += 1
        self._model_seconds += seconds
        now = self._clock()
        start = 0
        for request in batch:
            stop = start + request.planes.shape[0]
            if not request.future.done():
                request.future.set_result((policy[start:stop], value[start:stop]))
            if self._metrics is not None:
                self._metrics.observe("tengen_inference_latency_seconds", now - request.arrived)
            start = stop
        if self._metrics is not None:
            self._metrics.inc("tengen_inference_evaluations_total", rows)
            self._metrics.observe("tengen_inference_batch_size", rows)

    def _compute(self, parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, float]:
        """The one model call for a batch (on the executor thread)."""
        planes = parts[0] if len(parts) == 1 else np.concatenate(parts)
        with self._model_use.call():
            start = time.perf_counter()
            policy, value = self._model(planes) if self._with_utility is None else self._with_utility(planes)
            return policy, value, time.perf_counter() - start

    # -- control ---------------------------------------------------------------------------

    def load_weights(self, blob: bytes, sha256: str, version: int) -> int:
        """Hot-swap to a new model between two batches; returns the version now served
        (a version older than the one served is not loaded: loads are sent without
        waiting, and a newer one may arrive first).

        The blob's sha256 must equal ``sha256`` (else ValueError, weights unchanged); a
        blob that does not fit the network raises ``WeightsError`` (a ValueError) with
        the weights unchanged too. The compiled function reads the same variables, so
        the swap never retraces.
        """
        from tengen.engine.network import blob_sha256

        blob = bytes(blob)
        digest = blob_sha256(blob)
        if digest != sha256:
            raise ValueError(f"weights sha256 mismatch: blob has {digest}, expected {sha256}")
        with self._model_use.swap():
            if int(version) < self._version:
                return self._version  # a newer model came first (loads are not waited on in order)
            self._model.load_weights_blob(blob)
            self._version = int(version)
        if self._metrics is not None:
            self._metrics.set("tengen_model_version", self._version, component="inference")
        return self._version

    def version(self) -> int:
        """The model version being served."""
        return self._version

    def set_clients(self, n: int) -> None:
        """How many workers are attached (flush as soon as that many requests wait)."""
        self._check_clients(n)
        self.clients = int(n)
        if self._wakeup is not None and self._loop is not None and not self._loop.is_closed():
            # recheck the flush rule now; the loop may be another thread's (a sync Ray method)
            self._loop.call_soon_threadsafe(self._wakeup.set)

    def stats(self) -> dict[str, Any]:
        """Counters since start: evaluations, batches, mean batch size, queue depth now,
        version, seconds spent in model calls."""
        return {
            "evaluations": self._evaluations,
            "batches": self._batches,
            "mean_batch_size": self._evaluations / self._batches if self._batches else 0.0,
            "queue_depth": len(self._pending),
            "queued_rows": self._pending_rows,
            "version": self._version,
            "model_seconds": self._model_seconds,
            "traces": self._model.trace_count,
            "clients": self.clients,
            "model_calls": self.model_calls,
            "metrics": self._metrics is not None,
        }

    @staticmethod
    def _check_clients(n: int) -> None:
        if int(n) < 1:
            raise ValueError(f"clients must be >= 1, got {n}")


class _CallsAndSwaps:
    """Model calls share the model; a weights swap has it alone. A swap waits for the
    calls in flight, and calls that come after it wait for the swap (so a stream of
    calls cannot keep a new model out)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._calls = 0
        self._swapping = False
        self._held = 0  # calls waiting for a swap

    def snapshot(self) -> dict[str, Any]:
        """What is in the model and what waits now (tests wait on it)."""
        with self._changed:
            return {"calls": self._calls, "swapping": self._swapping, "calls_held": self._held}

    @contextmanager
    def call(self) -> Iterator[None]:
        with self._changed:
            if self._swapping:
                self._held += 1
                self._changed.wait_for(lambda: not self._swapping)
                self._held -= 1
            self._calls += 1
        try:
            yield
        finally:
            with self._changed:
                self._calls -= 1
                self._changed.notify_all()

    @contextmanager
    def swap(self) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: not self._swapping)
            self._swapping = True
            self._changed.wait_for(lambda: self._calls == 0)
        try:
            yield
        finally:
            with self._changed:
                self._swapping = False
                self._changed.notify_all()
