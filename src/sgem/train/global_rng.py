"""The one lock around torch's default (global) random generator.

Candidate trainings may run in threads of the search process (the inline executor trains
chunks side by side, and in the background while the search refits its surrogate). Whatever
seeds torch's default generator and then draws from it holds `GLOBAL_RNG_LOCK` for that whole
stretch, so no other thread reseeds or draws in between and every draw follows from its seed:
a vectorised chunk while it builds its networks, a one-at-a-time training throughout, the
surrogate while it initialises its weights. Code that only needs random numbers of its own
uses a private `torch.Generator` instead (vectorised dropout, the surrogate's dropout).
"""

from __future__ import annotations

import threading

GLOBAL_RNG_LOCK = threading.Lock()

__all__ = ["GLOBAL_RNG_LOCK"]
