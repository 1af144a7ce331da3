"""What servelab watches beside the load driver: CPU and memory, the accept queue, the
servers' logs, other processes on the stack's CPUs."""
