"""Submitted runs (`gym eval submit`): the headless read layer for Slurm jobs and their files.

No UI and no writing: this package reads a submission's record, its benchmarks' files and
Slurm's own commands, and folds them into one model per benchmark. The five steps, in order:

1. Resolve what the user named into a `Submission` (`record.resolve(path_or_gym_job_id)`):
   a submission dir, one benchmark's job dir, a record file, or a gym job id in Gym's local
   index. Bad input raises `record.SubmissionError`, one line naming the file.

2. For a benchmark: read its `job.sh` (`jobscript.read(bench.local_dir / "job.sh")` ->
   `JobScript`: directives, service steps with their health checks, the driver and its rollouts)
   and list its files (`files.job_files(sub, bench, script, job_ids)` -> `JobFile`s: batch log,
   service logs, driver log per chain link, `.gym_job_chain`, the rollouts). Tail each; every
   line becomes facts with `JobFile.facts(line_no, text)` (`batchlog`, `steplog`). Call
   `job_files` again with `job.job_ids_in(facts)` as links appear (a resume chain's successors).

3. Poll Slurm: `slurmcli.poll_submission(sub, job_ids, job_names=...)` -> `SlurmPoll` (one
   `squeue` for the whole submission; `sacct`, else `scontrol`, only for jobs that ended), here
   or over SSH to the record's host; never raises: `SlurmPoll.error` says why Slurm could not be
   asked. Keep the newest knowledge with `old.merged(new)`; `slurmcli.POLL_INTERVAL` is the pace.

4. Fold: `job.fold(bench, script, facts, poll, files=..., rows_total=...)` -> `model.Job`: the
   chain's links in order (state, reason, exit code and signal, times, nodes, what each link's
   prologue did, which rows it wrote), each link's `ServiceStep`s (starting, healthy, died,
   never healthy, ended with the job), and per link whether its state came from Slurm or was
   inferred from its files. Pure and idempotent.

5. Conclude: `conclusion.conclude(job, now)` -> `model.Conclusion`: queued (why, in words;
   whether it will ever start; Slurm's expected start), running (nodes, elapsed of the limit,
   near the limit), or ended (COMPLETED, FAILED with exit code or signal, TIMEOUT, ...), with its
   evidence and `inferred=True` when Slurm could not tell.

Beside the five steps: `ray.read(url)` -> `RayState`, the Ray cluster under services that span
nodes, from its dashboard's state API (plain GETs; never raises, `RayState.error` says why).

Evidence (`core.model.Evidence`) names files relative to the submission dir. Words for Slurm's
states and pending reasons are in `words`; Slurm's time spellings in `slurmtime`.
"""
