"""Log format files (``*.toml``) of nccl-doctor, shipped as the package ``nccl_doctor.parsers``."""
