"""A job's life: the fair claim, its lease and fence, and the worker that runs it one by one."""
