"""Prometheus metrics of a run: the names, in one place, and how they are recorded.

Inside Ray, actors record through ``ray.util.metrics`` so that each node's metrics
agent serves them on one port and Ray's service-discovery file lists the targets
(an HTTP server per actor would collide on ports). The names follow Prometheus
conventions: base units, ``_total`` for counters, few label values. Dashboards in
deploy/ use exactly these names; change them only with the dashboards.
"""

from __future__ import annotations

from typing import Any

__all__ = ["METRICS", "RunMetrics"]

#: name -> (kind, description, label keys, histogram boundaries)
METRICS: dict[str, tuple[str, str, tuple[str, ...], tuple[float, ...]]] = {
    "tengen_selfplay_games_total": ("counter", "Self-play games finished", ("worker",), ()),
    "tengen_selfplay_positions_total": ("counter", "Positions recorded for training", ("worker",), ()),
    "tengen_selfplay_evaluations_total": ("counter", "Leaf evaluations requested by self-play", ("worker",), ()),
    "tengen_selfplay_cache_hits_total": ("counter", "Leaf evaluations answered by the worker's evaluation cache",
                                         ("worker",), ()),
    "tengen_selfplay_moves_total": ("counter", "Moves played in self-play", ("worker",), ()),
    "tengen_selfplay_game_length_moves": ("histogram", "Moves per finished self-play game", (),
                                          (5, 10, 20, 40, 80, 160, 320, 640)),
    "tengen_learner_steps_total": ("counter", "Training steps", (), ()),
    "tengen_learner_loss": ("gauge", "Training loss of the last step", ("part",), ()),
    "tengen_learner_positions_per_second": ("gauge", "Positions read from the stream per second", (), ()),
    "tengen_learner_reuse_ratio": ("gauge", "Samples drawn per position added", (), ()),
    "tengen_replay_window_positions": ("gauge", "Positions in the replay window", (), ()),
    "tengen_sample_age_versions": ("gauge", "Best version minus the version of recent samples", (), ()),
    "tengen_gating_games_total": ("counter", "Gating games played", (), ()),
    "tengen_gating_score": ("gauge", "Candidate's score in the last gating match", (), ()),
    "tengen_gating_llr": ("gauge", "SPRT log-likelihood ratio of the last gating match", (), ()),
    "tengen_gating_promotions_total": ("counter", "Candidates promoted", (), ()),
    "tengen_best_version": ("gauge", "Version of the best network", (), ()),
    "tengen_best_elo": ("gauge", "Elo of the best network on the promotion ladder", (), ()),
    "tengen_strength_score": ("gauge", "The best model's latest score against a fixed reference (a share of positions, "
                              "or of games with draws half)", ("reference",), ()),
    "tengen_strength_score_stderr": ("gauge", "Standard error of tengen_strength_score", ("reference",), ()),
    "tengen_strength_version": ("gauge", "Version of the model the latest strength evaluation measured", (), ()),
    "tengen_stream_length_entries": ("gauge", "Games in the sample stream", (), ()),
    "tengen_stream_lag_entries": ("gauge", "Games in the stream not yet read by the learner", (), ()),
    "tengen_stream_trimmed_unread_entries": ("gauge", "Games the stream trimmed before the learner read them, "
                                             "since the run started", (), ()),
    "tengen_redis_memory_bytes": ("gauge", "Memory used by the Redis server holding the stream", (), ()),
    "tengen_workers_alive": ("gauge", "Self-play workers answering", (), ()),
    "tengen_inference_evaluations_total": ("counter", "Positions evaluated by the inference server", (), ()),
    "tengen_inference_batch_size": ("histogram", "Positions per model call (after merging requests)", (),
                                    (1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096)),
    "tengen_inference_latency_seconds": ("histogram", "Time from a request's arrival to its answer", (),
                                         (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)),
    "tengen_inference_queue_depth": ("gauge", "Requests waiting for the next model call", (), ()),
    "tengen_model_version": ("gauge", "Model version in use", ("component",), ()),
}


class RunMetrics:
    """Records the metrics above with ``ray.util.metrics`` (created on first use).

    ``run`` is a default tag on every metric so that dashboards can tell runs apart.
    """

    def __init__(self, run: str):
        self.run = run
        self._metrics: dict[str, Any] = {}

    def _get(self, name: str):
        metric = self._metrics.get(name)
        if metric is None:
            from ray.util import metrics as ray_metrics

            kind, description, labels, boundaries = METRICS[name]
            tags = ("run", *labels)
            if kind == "counter":
                metric = ray_metrics.Counter(name, description=description, tag_keys=tags)
            elif kind == "gauge":
                metric = ray_metrics.Gauge(name, description=description, tag_keys=tags)
            else:
                metric = ray_metrics.Histogram(name, description=description, boundaries=list(boundaries),
                                               tag_keys=tags)
            metric.set_default_tags({"run": self.run})
            self._metrics[name] = metric
        return metric

    def inc(self, name: str, value: float = 1.0, **tags: str) -> None:
        if value > 0:
            self._get(name).inc(value, tags=tags or None)

    def set(self, name: str, value: float, **tags: str) -> None:
        self._get(name).set(value, tags=tags or None)

    def observe(self, name: str, value: float, **tags: str) -> None:
        self._get(name).observe(value, tags=tags or None)
