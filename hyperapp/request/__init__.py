"""What a run asks for, checked once: the method, its parameters, device, threshold and inputs
(:class:`DetectRequest`, :class:`AnalyseRequest`; the names each front end gives them: :data:`VOCABULARY`)."""

from hyperapp.request.requests import VOCABULARY, AnalyseRequest, DetectRequest, job_keys, labeller

__all__ = ["VOCABULARY", "AnalyseRequest", "DetectRequest", "job_keys", "labeller"]
