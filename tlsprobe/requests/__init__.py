"""One request layer: what a user asked for, built and validated once, from the command line
or from the Python API, and the pipeline's options made from it.

- `ProbeRequest` (probe.py): one server's probe -> `probes.probe.ProbeOptions`;
- `ScanRequest` (scan.py): audits -> `probes.audit.run.AuditOptions` and, from its
  `ConnectionSettings`, the one `Scheduler`;
- `SurveyRequest` (survey.py): a population survey -> `AuditOptions` and `ShardSettings`;
- `CaptureRequest` (capture.py): captures to read -> `offline.analyzer.AnalyzerOptions` and
  the connection filter, plus the reader of one capture file (`open_capture`).

Each has `from_args(argparse.Namespace)` (the command line; messages name the options,
`--groups`) and a constructor the API calls (`build`; messages name the parameters,
`groups`): both end in the same checks (names.py says how each input is spelt), so that a
bad value gets the same one-line `UsageError` either way. Module level imports only the
standard library, `errors` and the names: what a builder needs is imported when it runs.
"""

from tlsprobe.requests.names import API, CLI, Names

__all__ = ["API", "CLI", "Names"]
