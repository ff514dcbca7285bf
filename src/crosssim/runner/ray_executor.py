"""``--executor ray``: the same engine jobs as the local process pool, run as Ray tasks.

Users with many policies outgrow one machine; a Ray cluster (``--address``) runs each engine
column as a task with the same code path (``execute_job``), so results are identical to the
local executor for the same seeds. Without an address a private local instance is started on
127.0.0.1 and shut down afterwards. A task whose worker dies becomes failed rows, as locally
(rows of that column finished before the crash are not streamed back: a column is one task).
"""

from __future__ import annotations

import os

from crosssim.errors import CrossSimError


def _run_job(job):
    from crosssim.runner.workers import execute_job

    messages = []
    execute_job(job, lambda kind, payload: messages.append((kind, payload)))
    return messages


def run_jobs_ray(jobs, *, on_message, address: str | None = None) -> None:
    try:
        import ray
    except ImportError:
        raise CrossSimError("--executor ray needs Ray: pip install 'crosssim[rllib]' (or 'ray')") from None
    started = False
    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, _node_ip_address="127.0.0.1",
                         log_to_driver=False, configure_logging=False)
        except Exception as exc:
            raise CrossSimError(f"cannot start or reach Ray ({address or 'local instance'}): {exc}") from None
        started = True
    try:
        task = ray.remote(max_retries=0)(_run_job)
        pending = {task.remote(job): job for job in jobs}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            job = pending.pop(ref)
            try:
                for kind, payload in ray.get(ref):
                    on_message(job, kind, payload)
            except Exception as exc:  # worker crashed, node lost, ...
                on_message(job, "lost", f"{job.profile}: Ray task failed ({type(exc).__name__}: {str(exc)[:200]})")
    finally:
        if started:
            ray.shutdown()
