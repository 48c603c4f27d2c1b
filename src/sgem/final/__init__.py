"""The final stage: a routing and its cells retrained on train + validation, tested once.

`run_final` (`stage.py`) is the one entry point, `FinalProtocol` (`protocol.py`) what it
does: fixed or tracked length (`length.py`), experts from scratch or warm from a global
network of their cell (`warm_start.py`), the champion cell (`champion.py`), the finalists'
second look (`check.py`); `expert_fit.py` trains one final network, here or on workers;
under a time budget, `seed_rounds.py` spends what the stage leaves on more seeds.
Names resolve on first use, so `sgem.moe` can import the modules below without a cycle.
"""

from ..lazy import lazy_attributes

_NAMES = {
    "FinalProtocol": ".protocol",
    "FINAL_LENGTHS": ".protocol",
    "run_final": ".stage",
}
__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_attributes(__name__, _NAMES, __all__)
