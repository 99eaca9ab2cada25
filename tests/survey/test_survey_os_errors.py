"""Files tlsprobe cannot read or write are said in tlsprobe's words (errors.os_error_text:
the system's reason in lower case), never Python's ('cannot write there (File exists)',
'not a survey manifest ([Errno 20] Not a directory: ...)', pyarrow's 'Failed to open local
file ... Detail: [errno 20]'): in survey runs, summaries and diffs, `scan -f`, and the
output files of scan and clients. Real files; the survey folder is a real run's."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.survey.test_survey_input import cli, refused_survey  # noqa: F401 (a fixture)

#: what Python (or pyarrow) says that tlsprobe does not: a capitalised system reason, an
#: errno in brackets
PYTHON_WORDS = re.compile(r"(?i:\[errno)|File exists|Not a directory|Is a directory|"
                          r"No such file|Permission denied|Failed to open")


@pytest.mark.parametrize("args, said", [
    (["survey", "127.0.0.1/32:1", "--out", "{tmp}/file"],
     "--out {tmp}/file: a file, not a folder: give a folder (it is created if missing)"),
    (["survey", "127.0.0.1/32:1", "--out", "{tmp}/file/o"],
     "--out {tmp}/file/o: cannot write there (not a directory)"),
    (["survey", "summary", "{tmp}/file"],
     "{tmp}/file/_manifest.json: cannot read it (not a directory)"),
    (["survey", "diff", "{tmp}/done", "{tmp}/done", "--jsonl", "{tmp}/file/c"],
     "--jsonl {tmp}/file/c: cannot write it (not a directory)"),
    (["survey", "diff", "{tmp}/done", "{tmp}/done", "--parquet", "{tmp}/file/c"],
     "--parquet {tmp}/file/c: cannot write it (not a directory)"),
    (["survey", "diff", "{tmp}/done", "{tmp}/done", "--parquet", "{tmp}"],
     "--parquet {tmp}: cannot write it (is a directory)"),
    (["scan", "-f", "{tmp}/file/t"], "{tmp}/file/t: cannot read it (not a directory)"),
    (["scan", "-f", "{tmp}"], "{tmp}: cannot read it (is a directory)"),
    (["clients", "127.0.0.1:1", "--profiles-dir", "{tmp}/file"],
     "--profiles-dir: {tmp}/file: not a folder"),
], ids=["out-a-file", "out-under-a-file", "summary-of-a-file", "diff-jsonl", "diff-parquet",
        "diff-parquet-a-folder", "scan-f-under-a-file", "scan-f-a-folder",
        "clients-profiles-dir-a-file"])
def test_a_file_error_is_in_tlsprobes_words(args: list[str], said: str,
                                            refused_survey: Path) -> None:  # noqa: F811
    tmp = refused_survey
    (tmp / "file").write_text("")
    proc = cli(*(a.format(tmp=tmp) for a in args), tmp_path=tmp)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert line == "tlsprobe: error: " + said.format(tmp=tmp), line
    assert not PYTHON_WORDS.search(line), line


def test_one_wording_for_every_os_error() -> None:
    """errors.os_error_text: the errno's reason, pyarrow's errors too; text without one
    as it is."""
    from tlsprobe.errors import os_error_text
    assert os_error_text(NotADirectoryError(20, "Not a directory")) == "not a directory"
    assert os_error_text(OSError(20, "Failed to open local file 'x'. Detail: [errno 20] "
                                     "Not a directory")) == "not a directory"
    assert os_error_text(OSError("Detail: [errno 21] Is a directory")) == "is a directory"
    assert os_error_text(OSError("Cannot open for reading: path 'x' is a directory")) == \
        "Cannot open for reading: path 'x' is a directory"
