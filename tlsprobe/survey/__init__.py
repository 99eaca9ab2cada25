"""Population runs (`tlsprobe survey`): targets in shards, each shard audited by the asyncio
scanner inside a worker (Dask, or in-process), results as Parquet and JSON lines, resumable.

Modules: targets (reading and sharding targets), rows (an AuditReport as Parquet rows),
store (the output directory: manifest, atomic shard files), execute (where shards run),
pacing (the global connection rate), summary (the population answers from the files).
"""
