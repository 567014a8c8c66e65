"""The job model: processes, ranks, progress per process group, versions and network."""

from .job import STAGES, JobModel, RankState, build_job, pg_key, stage_index

__all__ = ["STAGES", "JobModel", "RankState", "build_job", "pg_key", "stage_index"]
