"""A survey's output folder read as analysts read it: `pandas.read_parquet(DIR)`,
`pyarrow.dataset.dataset(DIR)` and DuckDB's `read_parquet('DIR/*.parquet')`, one row per
target with every audit result as columns (`--checks all` too), the same schema in every
shard; and a folder written by an older tlsprobe (manifest.json, JSON lines beside the
Parquet files) resumed into the new layout."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.survey.test_survey_run import cli

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow not installed "
                         "(pip install '.[cluster]')")
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def targets(lab, tmp_path_factory) -> tuple[Path, list[str]]:
    servers, refused = lab
    names = [s.target for s in servers] + [refused]
    path = tmp_path_factory.mktemp("survey-read") / "targets.txt"
    path.write_text("\n".join(names) + "\n")
    return path, names


@pytest.fixture(scope="module")
def survey_args(targets, dask_cluster) -> list[Any]:
    return ["survey", targets[0], "--scheduler", dask_cluster, "--shard-size", "1"]


@pytest.fixture(scope="module")
def survey(survey_args, tmp_path_factory) -> Path:
    """The lab surveyed with the default checks, one shard per address."""
    out = tmp_path_factory.mktemp("survey-read-out") / "out"
    proc = cli(*survey_args, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def all_checks(lab, dask_cluster, tmp_path_factory) -> Path:
    """`--checks all` on one lab server (OpenSSL, TLS 1.2 and 1.3) and the refused target."""
    servers, refused = lab
    out = tmp_path_factory.mktemp("survey-all") / "out"
    proc = cli("survey", "-", "--out", out, "--scheduler", dask_cluster, "--checks", "all",
               "--no-progress", input_text=f"{servers[1].target}\n{refused}\n")
    assert proc.returncode == 0, proc.stderr
    return out


def pa_strings(values: list[str]) -> Any:
    import pyarrow as pa
    return pa.array(values, pa.string())


def json_lines(out: Path) -> list[dict[str, Any]]:
    return sorted((json.loads(line) for path in sorted((out / "_jsonl").glob("*.jsonl"))
                   for line in path.read_text().splitlines()), key=lambda d: d["index"])


def test_the_folder_reads_with_pandas_pyarrow_and_duckdb(survey, targets):
    import duckdb
    import pandas as pd
    import pyarrow.dataset as ds
    n = len(targets[1])
    # only Parquet files where the readers look; the rest under names they skip
    assert sorted(p.name for p in survey.iterdir() if not p.name.startswith(("_", "."))) \
        == sorted(p.name for p in survey.glob("shard-*.parquet"))
    assert (survey / "_manifest.json").is_file() and not (survey / "manifest.json").exists()
    frame = pd.read_parquet(survey)
    assert len(frame) == n and sorted(frame["index"]) == list(range(1, n + 1))
    assert ds.dataset(survey).count_rows() == n
    got = duckdb.sql(f"select count(*), count(distinct index) from "
                     f"read_parquet('{survey}/*.parquet')").fetchall()
    assert got == [(n, n)]
    # the README's query of the per-version structs
    preferred = duckdb.sql(f"""SELECT g.version, g.preferred, count(*) FROM
        read_parquet('{survey}/*.parquet'), unnest(group_results) AS t(g) WHERE g.spoken
        GROUP BY 1, 2 ORDER BY 1, 2""").fetchall()
    assert ("TLS 1.3", "X25519MLKEM768", 1) in preferred and ("TLS 1.2", None, 1) in preferred


def test_one_row_per_target_with_the_same_schema_in_every_shard(survey, targets, lab):
    import pandas as pd
    servers, refused = lab
    frame = pd.read_parquet(survey)
    counts = (frame["host"] + ":" + frame["port"].astype(str)).value_counts()
    assert sorted(counts.index) == sorted(targets[1]) and set(counts) == {1}
    assert frame["pq_verdict"].value_counts(dropna=False).sum() == len(targets[1])
    schemas = {str(pq.read_schema(p)) for p in survey.glob("shard-*.parquet")}
    assert len(schemas) == 1        # the unreachable target's shard too
    row = frame.set_index(frame["host"] + ":" + frame["port"].astype(str)).loc[refused]
    assert row["error_kind"] == "network" and pd.isna(row["pq_verdict"])
    assert list(row["versions"]) == [] and pd.isna(row["cert_sha256"])
    from tlsprobe._version import __version__
    for server in servers:
        reached = frame[frame["port"] == server.port].iloc[0]
        assert pd.isna(reached["error_kind"]) and reached["pq_verdict"] == server.pq
        assert list(reached["versions"]) == [v for v in ("TLS 1.3", "TLS 1.2")
                                             if getattr(server, "tls" + v[4:].replace(".", ""))]
        assert reached["tlsprobe_version"] == __version__
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", reached["started_at"])
        assert reached["connections"] > 0 and reached["duration_s"] > 0


def test_checks_all_results_are_columns(all_checks):
    import pandas as pd
    from tlsprobe.model.check_catalog import ALIASES
    frame = pd.read_parquet(all_checks).sort_values("index")
    reached, refused = (frame.iloc[i] for i in (0, 1))
    report = json_lines(all_checks)[0]
    assert report["check_results"], "--checks all ran no check"
    for name in ALIASES["all"]:
        assert f"check_{name}" in frame.columns and f"check_{name}_details" in frame.columns
        assert pd.isna(refused[f"check_{name}"])
    for result in report["check_results"]:
        assert reached[f"check_{result['name']}"] == result["verdict"], result["name"]
        details = json.loads(reached[f"check_{result['name']}_details"])
        assert details["reason"] == result["reason"]
        assert details["details"] == result.get("details")
    assert reached["cert_sha256"] == report["certificates"][0]["sha256"]
    assert reached["chain_length"] == len(report["certificates"])
    suites = {s["version"]: s["suites"] for s in reached["suite_results"]}
    assert suites and all(len(names) for names in suites.values())
    assert {s["version"] for s in reached["signature_schemes"]} <= set(suites)
    assert reached["rating"] is not None and pd.isna(refused["rating"])


def test_an_old_folder_resumes_into_the_new_layout(survey, survey_args, targets, tmp_path):
    """A folder as tlsprobe wrote it before: manifest.json (schema 1) and the JSON lines
    files beside the Parquet files, one shard in the old rows (one per target and version),
    one shard missing. The run resumes it, moves the files and surveys the old shard
    again: the folder reads as one table."""
    import pandas as pd
    old = tmp_path / "old"
    shutil.copytree(survey, old)
    manifest = json.loads((old / "_manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps({**manifest, "schema": 1}))
    (old / "_manifest.json").unlink()
    pq.write_table(pq.read_table(old / "shard-00001.parquet", columns=["shard", "index"]
                                 ).append_column("version", pa_strings(["TLS 1.3"])),
                   old / "shard-00001.parquet")
    for path in (old / "_jsonl").iterdir():
        path.rename(old / path.name)
    (old / "_jsonl").rmdir()
    (old / "shard-00002.parquet").unlink()
    (old / "shard-00002.jsonl").unlink()
    kept = {p.name: p.stat().st_ino for p in old.glob("shard-*.parquet")
            if p.name != "shard-00001.parquet"}
    proc = cli(*survey_args, "--out", old, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert {p.name: p.stat().st_ino for p in old.glob("shard-*.parquet") if p.name in kept} \
        == kept
    assert not (old / "manifest.json").exists() and not list(old.glob("*.jsonl"))
    assert len(pd.read_parquet(old)) == len(targets[1])
    assert [d["index"] for d in json_lines(old)] == list(range(1, len(targets[1]) + 1))


def test_progress_before_the_end_and_a_paragraph_at_the_end(targets, dask_cluster, tmp_path):
    """The default shard size puts the whole lab in one shard: the lines before the last
    count targets its worker announced before the shard was written."""
    n = len(targets[1])
    out = tmp_path / "out"
    proc = cli("survey", targets[0], "--out", out, "--scheduler", dask_cluster)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads((out / "_manifest.json").read_text())["shards"]) == 1
    counts = [int(m) for m in re.findall(r"^tlsprobe survey: (\d+)/%d targets, " % n,
                                         proc.stderr, re.M)]
    assert counts[-1] == n and len(counts) >= 2 and counts == sorted(set(counts)), proc.stderr
    (text,) = proc.stdout.splitlines()      # one paragraph, on stdout
    assert text.startswith(f"tlsprobe survey: {n} targets in {out} ")
    assert f"{n - 1} reached, 1 unreachable (network 1)" in text
    assert f"pandas.read_parquet('{out}')" in text
    assert "post-quantum group accepted by 25.0%" in text    # one lab server of four
