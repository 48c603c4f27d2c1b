"""`sgem fit` / `sgem.fit`: search an MoE for the user's own file and save the model.

    model = sgem.fit("train.csv", target="label", time_budget="10m")
    model = sgem.fit("sales.csv", horizon=14)          # long format: unique_id, ds, y
    model = sgem.fit("photos/", image_size=32)          # one sub-folder per class

The kind of data is inferred from the path (a folder: images; a .tsf file or a table with
the id/time/value columns: series; any other table: tabular, which needs `target`). The
run config starts from the matching preset's space and search (toy, ts-offline,
images-offline), takes the data-derived defaults (M from the number of samples, context
from the frequency), then the user's overrides (`sgem.run.fit_setup`); it is written whole
to config.yaml and run through the same experiment path as `sgem run` (so `sgem resume`
works). Where the user leaves K open, a budgeted table fit chooses it
(`sgem.run.experts_choice`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import SgemUserError
from .experts_choice import AUTO_EXPERTS, fit_auto_experts, grows_experts
from .fit_setup import fit_config


def fit(
    data: Any,
    *,
    out: str | os.PathLike | None = None,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
    n_experts: int | str | None = None,
    started: float | None = None,
    **options: Any,
):
    """Search an MoE for `data`, save it in `out` (default runs/fit-<name>-seed<N>) and
    return the loaded `SgemModel` (its result.json as `model.result`). Options are those of
    `fit_config`; `n_experts="auto"` runs `fit_auto_experts`.

    `data`: a path, a pandas DataFrame (a table, or long-format series with unique_id / ds /
    y columns) or a tuple (X, y) (X 2-D: features x0..x{d-1}, target "target"); in-memory
    data is written once into `out/input/` and fitted from there (`sgem.run.fit_input`), so
    `sgem resume` and config.yaml work as for a file. A `time_budget` counts from
    this call (or from `started`, a `time.perf_counter()` value: the CLI's start, so its
    imports count): the fit returns within it (plus a few seconds; `sgem.train.time_fence`)."""
    from ..moe.model import load

    saved, result = fit_and_save(
        data,
        out=out,
        progress=progress,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        gpus_per_task=gpus_per_task,
        n_experts=n_experts,
        started=started,
        **options,
    )
    model = load(saved)
    model.result = result
    return model


def fit_and_save(
    data: Any,
    *,
    out: str | os.PathLike | None = None,
    progress: bool = True,
    executor: str = "inline",
    workers: int = 2,
    ray_address: str | None = None,
    gpus_per_task: float = 0.0,
    n_experts: int | str | None = None,
    started: float | None = None,
    **options: Any,
) -> tuple[Path, dict]:
    """`fit` without loading the saved model back: (`out`, its result.json). The CLI
    prints the result and leaves (loading took 1.3 s, past a 3-minute series fit's budget)."""
    import time

    started = time.perf_counter() if started is None else started
    from .fit_input import check_data, forget, in_memory, materialise
    from .pipeline import run_config

    check_data(data)
    if out is None:
        stem = "data" if in_memory(data) else Path(data).stem or "data"
        out = Path("runs") / f"fit-{stem}-seed{options.get('seed', 0)}"
    written = None
    if in_memory(data):
        data, options["target"], written = materialise(data, out, options.get("target"))
    execution: dict[str, Any] = dict(
        progress=progress,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        gpus_per_task=gpus_per_task,
    )
    try:
        if n_experts == "auto":
            result = fit_auto_experts(data, out, execution=execution, started=started, **options)
        else:
            run = fit_config(data, n_experts=_experts(n_experts), **options)
            # K chosen on the holdout within the budget
            if grows_experts(run):
                first = AUTO_EXPERTS[0]
                result = fit_auto_experts(
                    data, out, execution, (first, *range(first + 1, 9)), started, True, **options
                )
            else:
                result = run_config(run, out, **execution, started=started)
    except BaseException:
        forget(written, out)  # a fit refused before the run claimed `out` leaves nothing
        raise
    return Path(out), result


def _experts(value: int | str | None) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    try:
        return int(value)
    except ValueError:
        raise SgemUserError(f"--experts must be an integer >= 1 or 'auto', got {value!r}") from None


__all__ = ["fit", "fit_and_save"]
