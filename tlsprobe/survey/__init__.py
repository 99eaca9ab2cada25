"""Population runs (`tlsprobe survey`): targets in shards, each shard audited by the asyncio
scanner (in this process, in local worker processes, or on Dask), results as Parquet and
JSON lines, resumable.

Modules: targets (reading and sharding targets), rows (an AuditReport as Parquet rows),
store (the output directory: manifest, atomic shard files), lanes (one process's audit
pipeline across shards), local (the local worker processes), execute (Dask, progress),
summary (the population answers from the files).
"""
