"""The whole job: the pipeline, the doctor and the report people read."""
