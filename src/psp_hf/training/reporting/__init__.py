"""What a training run reports: `metrics.jsonl` (`metrics_log.py`), `metrics.png` (`plot.py`) and the experiment
trackers of `--report-to` (`trackers.py`)."""
