"""Training on a Ray cluster (or a local Ray): `RayExecutor`, installed with the `ray` extra."""

from __future__ import annotations

import traceback
from collections.abc import Sequence

from .chunk_runner import ChunkRunner, plan
from .jobs import ChunkFuture, JobResult, TrainerFactory, TrainJob, collect, make_trainer, submit

# -- Ray ----------------------------------------------------------------------------------
_RAY_RUNNERS: dict = {}


def _ray_train(payload_box: list, jobs: list[TrainJob]) -> list[JobResult]:
    """Runs on a Ray worker: build the trainer once per worker and payload, then train."""
    import ray

    ref = payload_box[0]
    key = ref.hex()
    runner = _RAY_RUNNERS.get(key)
    if runner is None:
        import torch

        task, space, train_config, factory = ray.get(ref)
        device = "cuda" if torch.cuda.is_available() and ray.get_gpu_ids() else "cpu"
        trainer = make_trainer(factory, task, space, train_config, device)
        runner = _RAY_RUNNERS[key] = ChunkRunner(trainer)
    return runner.run(jobs)


class RayExecutor:
    """Trains on a Ray cluster (or a local Ray started here). Tasks declare their CPU and GPU
    needs; results come back to the search process, which stays the only writer."""

    name = "ray"

    def __init__(
        self,
        task,
        space,
        train_config,
        address: str | None = None,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        connect_timeout_s: float = 20.0,
        trainer_factory: TrainerFactory | None = None,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise ImportError("the 'ray' executor needs Ray: pip install -e '.[ray]'") from exc
        self._ray = ray
        self._owns = False
        if not ray.is_initialized():
            if address is not None:
                _check_reachable(address, connect_timeout_s)
            try:
                ray.init(
                    address=address,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                )
            except Exception as exc:
                raise ConnectionError(
                    f"could not connect to a Ray cluster at {address!r}: {exc}. Start one with "
                    "`ray start --head`, or omit the address to start a local Ray."
                ) from exc
            self._owns = True
        self._plan_args = (task, space, train_config)
        self._payload = [ray.put((task, space, train_config, trainer_factory))]
        self._remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(_ray_train)

    def run(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        return collect(submit(self, jobs))

    def plan_jobs(self, jobs: Sequence[TrainJob]) -> list[list[int]]:
        return plan(*self._plan_args, jobs)

    def submit_chunk(self, jobs: list[TrainJob]) -> ChunkFuture:
        return _RayChunk(self._ray, self._remote.remote(self._payload, jobs), len(jobs))

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


class _RayChunk:
    """A chunk running as one Ray task (see `RayExecutor.submit_chunk`)."""

    def __init__(self, ray, ref, n_jobs: int) -> None:
        self.ray, self.ref, self.n_jobs = ray, ref, n_jobs
        self._out: list[JobResult] | None = None

    def done(self) -> bool:
        if self._out is not None:
            return True
        ready, _ = self.ray.wait([self.ref], timeout=0)
        return bool(ready)

    def result(self) -> list[JobResult]:
        if self._out is None:
            try:
                self._out = self.ray.get(self.ref)
            except Exception:
                self._out = [JobResult(None, 0.0, "?", traceback.format_exc())] * self.n_jobs
        return self._out


def _check_reachable(address: str, timeout_s: float) -> None:
    """Fail fast with a clear message when nothing listens at a Ray address (Ray itself
    can wait a long time before giving up)."""
    import socket

    if address in ("auto", "local") or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        raise ConnectionError(
            f"no Ray cluster answers at {address!r} ({exc}). Check the address (host:port of "
            "the head node's GCS, e.g. 127.0.0.1:6379), start one with `ray start --head`, or "
            "omit the address to start a local Ray."
        ) from exc


__all__ = ["RayExecutor"]
