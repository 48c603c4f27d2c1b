"""Where candidates and final experts train: the jobs that travel to workers, one chunk
trained in a process, the executors (inline threads, processes, Ray) that run the same
chunks everywhere, a stand-in trainer for scale-out, phase timing and progress bars.

Nothing is imported here, so `sgem.execution.jobs` stays as light as its own imports.
"""
