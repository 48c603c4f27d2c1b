"""A run end to end: the typed run config and presets, the run directory, the time budget
and its clock, one method on one task (`experiment`), the pipeline behind `sgem run` /
`sgem fit` / resume, the input written for `sgem.fit`, `sgem predict`'s file formats, what a
finished run reports, and the kill-and-resume drill.

Nothing is imported here: `sgem.fit` resolves `sgem.run.fitting` on first use.
"""
