#!/usr/bin/env python3
"""Parses dlm_prometheus_sample's output with the Prometheus client
library's own text parser (Debian python3-prometheus-client) and checks the
families and values it must hold. Exits 1 on any problem."""
import subprocess
import sys
import tempfile

from prometheus_client.parser import text_string_to_metric_families


def main():
    sample = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        text = subprocess.run([sample, d], check=True, capture_output=True,
                              text=True, timeout=60).stdout
    families = {f.name: f for f in text_string_to_metric_families(text)}
    problems = []
    counters = ["dlm_acquisitions", "dlm_refusals", "dlm_waits",
                "dlm_timeouts", "dlm_deadlocks", "dlm_releases",
                "dlm_renewals", "dlm_lost_leases", "dlm_release_failures",
                "dlm_store_reconnects",
                "dlm_store_errors"]
    histograms = ["dlm_acquire_duration_seconds",
                  "dlm_release_duration_seconds", "dlm_wait_duration_seconds"]
    for name in counters:
        if families.get(name) is None or families[name].type != "counter":
            problems.append(f"no counter {name}")
    for name in histograms:
        if families.get(name) is None or families[name].type != "histogram":
            problems.append(f"no histogram {name}")

    def value(family, suffix, client):
        for s in families[family].samples:
            if s.name == family + suffix and s.labels.get("client") == client:
                return s.value
        problems.append(f"no {family}{suffix} for client {client!r}")
        return None

    if not problems:
        checks = [
            (value("dlm_acquisitions", "_total", 'app "a"'), 20),
            (value("dlm_releases", "_total", 'app "a"'), 20),
            (value("dlm_deadlocks", "_total", "b"), 1),
            (value("dlm_acquire_duration_seconds", "_count", 'app "a"'), 20),
        ]
        for got, want in checks:
            if got is not None and got != want:
                problems.append(f"value {got} where {want} was expected")
        for fam in histograms:
            for client in ('app "a"', "b"):
                buckets = [s for s in families[fam].samples
                           if s.name == fam + "_bucket"
                           and s.labels["client"] == client]
                counts = [s.value for s in buckets]
                if counts != sorted(counts):
                    problems.append(f"{fam} {client}: buckets not cumulative")
                if buckets[-1].labels["le"] != "+Inf" or \
                        counts[-1] != value(fam, "_count", client):
                    problems.append(f"{fam} {client}: +Inf is not the count")
    for p in problems:
        print("check_prometheus:", p, file=sys.stderr)
    print(f"check_prometheus: {len(families)} families parsed, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
