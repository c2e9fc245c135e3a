import os

# Keep XLA from spawning more threads than the CI machine's two cores can use.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
# In-process CLI tests must not write JAX's compilation cache into the home directory (and
# must not switch it on for the rest of the session); test_napsu_cli checks it in a subprocess.
os.environ["SYNTHINFER_COMPILE_CACHE"] = "0"
