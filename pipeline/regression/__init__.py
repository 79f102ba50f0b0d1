"""What the regression checks found, as the screen and CI read it: alerts and baseline pins (alerts.py), latency
and cost trends (trends.py), the gate as JUnit XML (junit.py). The checks themselves sit lower, where the runs they
compare are reported: pipeline/evaluation/regression.py (evaluations) and pipeline/collect/traced.py (traced runs,
day by day)."""
