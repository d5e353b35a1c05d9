"""The reranking SLO alert rules (ops/prometheus/alerts.yml, seed 001):

- they use exactly the metric names, label names and label values groundwire
  exports: a real Prometheus exposition of the reranking stage's metrics,
  produced with every outcome, is compared with every selector in the rules
  (no Go needed);
- `promtool check rules` accepts them and `promtool test rules` passes the unit
  tests in ops/prometheus/alerts_test.yml (two consecutive 15-minute windows,
  the 100-attempt minimum, skipped attempts not eligible, per model).

promtool is built with `go install` at a pinned version into .tools/bin by
scripts/install_ops_tools.sh (cold: about 4.5 minutes on 2 cores, with the
module downloads; warm: instant). Without Go the promtool tests skip, except
under CI=true, where they fail (tests/support/toolchains.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import background_builds

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "ops" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "ops" / "prometheus" / "alerts_test.yml"
PROMTOOL = ROOT / ".tools" / "bin" / "promtool"

pytestmark = pytest.mark.timeout(900)

# Drives the real reranking stage through every outcome and prints the
# Prometheus exposition groundwire's exporter would serve.
_EXPOSITION = """
import asyncio
from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import REGISTRY, generate_latest
metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))
from groundwire.domain.reranking import FailurePolicy, RerankCandidate
from groundwire.providers.rerankers.offline import OfflineReranker
from groundwire.reranking.stage import RerankingStage, StageSettings

async def main():
    stage = RerankingStage(environment="prod")
    c = [RerankCandidate("d", "c", "text", 1)]
    fail = StageSettings(failure_policy=FailurePolicy.FAIL)
    await stage.run(OfflineReranker(), "text", c, StageSettings(), agent="a1")
    await stage.run(OfflineReranker(behaviour="unavailable"), "text", c, StageSettings())
    await stage.run(OfflineReranker(behaviour="unavailable"), "text", c, fail)
    await stage.run(OfflineReranker(behaviour="hang"), "text", c, StageSettings(timeout_seconds=0.01))
    await stage.run(OfflineReranker(), "text", [], StageSettings())

asyncio.run(main())
print(generate_latest(REGISTRY).decode())
"""


def exposition() -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "server"), str(ROOT), env.get("PYTHONPATH", "")]
    )
    res = subprocess.run(
        [sys.executable, "-c", _EXPOSITION],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def rule_exprs() -> list[str]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule["expr"] for group in doc["groups"] for rule in group["rules"]]


def exported_series(text: str) -> dict[str, dict[str, set[str]]]:
    """metric name -> label name -> values seen, from an exposition."""
    out: dict[str, dict[str, set[str]]] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} ", line)
        if not m:
            continue
        labels = out.setdefault(m.group(1), {})
        for name, value in re.findall(r'(\w+)="([^"]*)"', m.group(2)):
            labels.setdefault(name, set()).add(value)
    return out


def test_rules_select_what_groundwire_exports() -> None:
    series = exported_series(exposition())
    attempts = series["groundwire_rag_reranking_attempts_total"]
    assert attempts["outcome"] == {"succeeded", "fallback", "failed", "skipped"}, "control"
    assert attempts["timed_out"] == {"true", "false"}, "control"

    used = 0
    for expr in rule_exprs():
        for metric, matchers in re.findall(r"\b(groundwire_[a-z0-9_]+)(?:\{([^}]*)\})?", expr):
            used += 1
            assert metric in series, f"the rules use {metric}, which groundwire does not export"
            for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers):
                assert label in series[metric], f"{metric} has no label {label}"
                if op in ("=", "!="):
                    assert value in series[metric][label], f"{metric}{{{label}}} is never {value!r}"
        for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
            for label in (g.strip() for g in group.split(",")):
                assert label in attempts, f"the rules group by {label}, which is not exported"
    assert used >= 5, "control: the rules select groundwire metrics"


def test_rules_keep_the_seed_window_and_minimum() -> None:
    """Two consecutive 15-minute windows, at least 100 eligible attempts each."""
    doc = yaml.safe_load(RULES.read_text())
    alerts = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    assert len(alerts) == 4
    for rule in alerts:
        expr = " ".join(rule["expr"].split())
        assert "offset 15m" in expr
        assert "groundwire:reranking_eligible_attempts:increase15m >= 100" in expr
        assert "groundwire:reranking_eligible_attempts:increase15m offset 15m >= 100" in expr
    records = {r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"] if "record" in r}
    assert (
        '{outcome!="skipped"}[15m]' in records["groundwire:reranking_eligible_attempts:increase15m"]
    )


@pytest.fixture(scope="module")
def promtool() -> Path:
    """promtool at its pinned version (built once, cached in .tools/bin; started
    after collection when it was missing, tests/conftest.py)."""
    path = background_builds.ops_tool(
        "promtool", purpose="building promtool for the alert-rule tests", timeout=840
    )
    assert path == PROMTOOL
    return path


@pytest.mark.slow
def test_promtool_checks_the_rules(promtool: Path) -> None:
    res = subprocess.run(
        [str(promtool), "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 13 rules found" in res.stdout + res.stderr


@pytest.mark.slow
def test_promtool_rule_unit_tests_pass(promtool: Path) -> None:
    res = subprocess.run(
        [str(promtool), "test", "rules", str(RULE_TESTS)],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout + res.stderr
