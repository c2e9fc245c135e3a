import os

# Keep XLA from spawning more threads than the CI machine's two cores can use.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
